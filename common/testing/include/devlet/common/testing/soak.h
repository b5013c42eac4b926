// Support for the soak binaries (node_soak, extender_soak; issue 14 §3): their flags, what the
// process holds (RSS, descriptors, threads) and the verdict on it after the warm-up.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

namespace devlet::testing {

// SoakFlags: `--cycles N` measured cycles after `--warmup W`, a sample every `--every K`.
struct SoakFlags {
  int cycles = 1000;
  int every = 100;
  int warmup = 500;
};

// ParseSoakFlags reads the flags; nullopt (after a usage line on stderr naming `program`) when
// they are not understood or --cycles is not a positive multiple of --every.
inline std::optional<SoakFlags> ParseSoakFlags(int argc, char** argv, const char* program) {
  SoakFlags flags;
  bool ok = argc % 2 == 1;
  for (int i = 1; ok && i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    int* value = flag == "--cycles"   ? &flags.cycles
                 : flag == "--every"  ? &flags.every
                 : flag == "--warmup" ? &flags.warmup
                                      : nullptr;
    ok = value != nullptr;
    if (ok) *value = std::atoi(argv[i + 1]);
  }
  ok = ok && flags.cycles > 0 && flags.every > 0 && flags.warmup > 0 &&
       flags.cycles % flags.every == 0;
  if (!ok) {
    std::fprintf(stderr,
                 "usage: %s [--cycles N] [--every K] [--warmup W]\n"
                 "  N a positive multiple of K; W > 0\n",
                 program);
    return std::nullopt;
  }
  return flags;
}

// CountEntries counts the entries of a directory (0 when it is missing).
inline int CountEntries(const std::filesystem::path& dir) {
  std::error_code ec;
  int n = 0;
  for (auto it = std::filesystem::directory_iterator(dir, ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++n;
  }
  return n;
}

// ProcessUsage is what this process holds.
struct ProcessUsage {
  long rss_kib = 0;
  int fds = 0;
  int threads = 0;
};

inline ProcessUsage MeasureProcess() {
  ProcessUsage usage;
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) usage.rss_kib = std::strtol(line.c_str() + 6, nullptr, 10);
  }
  usage.fds = CountEntries("/proc/self/fd");
  usage.threads = CountEntries("/proc/self/task");
  return usage;
}

// ExpectSame appends to `problems` when a count at the end differs from the warm-up's.
inline void ExpectSame(std::string& problems, const char* what, long warm, long last) {
  if (warm == last) return;
  problems += std::string("\n  ") + what + ": " + std::to_string(warm) + " after the warm-up, " +
              std::to_string(last) + " at the end";
}

// UsageProblems prints the soak's summary line and returns what is wrong with the process's
// usage over the measured cycles ("" when nothing is): descriptor or thread counts at the end
// (`last`) other than after the warm-up (`warm`), or RSS that keeps growing. A leak grows all
// along; a one-time step does not (the first compaction of devlet-node's checkpoint journal, or
// a thread's first malloc arena: 0.7 to 1.6 MiB, seen anywhere from cycle 100 to 1,100). So RSS
// fails when the second half of the cycles (from `middle`) grew by 512 KiB or more (1 MiB per
// 1,000 cycles), or the whole run by 3 MiB or more.
inline std::string UsageProblems(const ProcessUsage& warm, const ProcessUsage& middle,
                                 const ProcessUsage& last, int cycles) {
  const long growth = last.rss_kib - warm.rss_kib;
  const long second_half = last.rss_kib - middle.rss_kib;
  std::printf("%d cycles after the warm-up: RSS %+ld KiB (%ld -> %ld; %+ld KiB in the second "
              "half), fds %d -> %d, threads %d -> %d\n",
              cycles, growth, warm.rss_kib, last.rss_kib, second_half, warm.fds, last.fds,
              warm.threads, last.threads);
  std::string problems;
  ExpectSame(problems, "open file descriptors", warm.fds, last.fds);
  ExpectSame(problems, "threads", warm.threads, last.threads);
  if (second_half >= 512) {
    problems += "\n  RSS grew by " + std::to_string(second_half) + " KiB in the second half";
  }
  if (growth >= 3072) problems += "\n  RSS grew by " + std::to_string(growth) + " KiB";
  return problems;
}

}  // namespace devlet::testing
