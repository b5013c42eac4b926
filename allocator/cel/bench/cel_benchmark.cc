// cel_benchmark: evaluations of typical DRA selectors per second, devlet against cel-go.
//
//   build-celx/allocator/cel/bench/cel_benchmark --celgo=build-celx/integration/celdiff/celdiff-oracle
//
// runs every selector of selectors.txt (beside this file) against its device with dra::Match
// under Google Benchmark (medians of 5 repetitions), then, with --celgo, runs the cel-go side in
// the same invocation (`celdiff-oracle bench`: k8s.io/dynamic-resource-allocation/cel v0.37.2,
// medians of 5) and prints the ratios: against CompilationResult.DeviceMatches (what the scheduler
// pays per device) and against cel-go's Program.Eval alone with a prebuilt activation.
// BM_Compile/<name> times dra::CompileSelector of the same selectors
// (--benchmark_filter=BM_Compile).
// Other flags: --selectors=FILE, --celgo_min_time=1s, and every --benchmark_* flag.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "devlet/cel/dra.h"
#include "devlet/common/status.h"
#include "nlohmann/json.hpp"

#ifndef CEL_BENCH_SELECTORS
#define CEL_BENCH_SELECTORS "selectors.txt"
#endif

namespace devlet::cel {
namespace {

struct Selector {
  std::string name;
  std::string expr;
  std::unique_ptr<Program> program;
};

struct Bench {
  std::unique_ptr<dra::SimpleDevice> device;
  std::vector<Selector> selectors;
};

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r");
  size_t e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) out.push_back(Trim(item));
  return out;
}

// Reads the corpus format of integration/celdiff (first device only) with "name: expr" selectors.
absl::StatusOr<Bench> ReadBench(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot read " + path);
  Bench bench;
  bool selectors = false;
  for (std::string raw; std::getline(in, raw);) {
    std::string line = Trim(raw);
    if (line.empty() || line[0] == '#') continue;
    if (selectors) {
      size_t colon = line.find(": ");
      if (colon == std::string::npos) return InvalidArgument(path + ": want 'name: expression'");
      Selector s;
      s.name = line.substr(0, colon);
      s.expr = line.substr(colon + 2);
      absl::StatusOr<Program> program = dra::CompileSelector(s.expr);
      if (!program.ok()) return WithContext(program.status(), path + ": " + s.name);
      s.program = std::make_unique<Program>(*program);
      bench.selectors.push_back(std::move(s));
      continue;
    }
    if (line == "selectors:") {
      selectors = true;
      continue;
    }
    if (line.rfind("device ", 0) == 0) {
      if (bench.device) continue;  // Only the first device is benchmarked.
      std::stringstream fields(line);
      std::string word, name, driver;
      fields >> word >> name >> driver;
      bench.device = std::make_unique<dra::SimpleDevice>(driver);
      continue;
    }
    if (!bench.device) return InvalidArgument(path + ": attribute before a device");
    size_t eq = line.find('=');
    if (eq == std::string::npos) return InvalidArgument(path + ": want 'TYPE NAME = VALUE'");
    std::string lhs = Trim(line.substr(0, eq));
    std::string value = Trim(line.substr(eq + 1));
    if (lhs == "allowMultipleAllocations") {
      bench.device->set_allow_multiple_allocations(value == "true");
      continue;
    }
    size_t space = lhs.find(' ');
    std::string type = lhs.substr(0, space);
    std::string name = Trim(lhs.substr(space + 1));
    if (type == "int") {
      bench.device->SetInt(name, std::stoll(value));
    } else if (type == "bool") {
      bench.device->SetBool(name, value == "true");
    } else if (type == "string") {
      bench.device->SetString(name, value);
    } else if (type == "version") {
      bench.device->SetVersion(name, value);
    } else if (type == "strings") {
      bench.device->SetStrings(name, SplitList(value));
    } else if (type == "capacity") {
      DEVLET_RETURN_IF_ERROR(bench.device->SetCapacity(name, value));
    } else {
      return InvalidArgument(path + ": unsupported type " + type);
    }
  }
  if (!bench.device) return InvalidArgument(path + ": no device");
  return bench;
}

// Keeps the median real time per iteration of each benchmark while printing as usual.
class MedianReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      if (run.run_type == Run::RT_Aggregate && run.aggregate_name == "median") {
        medians_[run.run_name.function_name] = run.GetAdjustedRealTime();
      }
    }
    ConsoleReporter::ReportRuns(runs);
  }
  const std::map<std::string, double>& medians() const { return medians_; }

 private:
  std::map<std::string, double> medians_;
};

absl::StatusOr<std::string> RunCommand(const std::string& command) {
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return Internal("cannot run " + command);
  std::string out;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) out.append(buffer, n);
  if (pclose(pipe) != 0) return Internal(command + " failed");
  return out;
}

int Main(int argc, char** argv) {
  std::string selectors_path = CEL_BENCH_SELECTORS;
  std::string celgo;
  std::string celgo_min_time = "1s";
  bool repetitions_given = false;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--selectors=", 0) == 0) {
      selectors_path = arg.substr(12);
    } else if (arg.rfind("--celgo=", 0) == 0) {
      celgo = arg.substr(8);
    } else if (arg.rfind("--celgo_min_time=", 0) == 0) {
      celgo_min_time = arg.substr(17);
    } else {
      if (arg.rfind("--benchmark_repetitions", 0) == 0) repetitions_given = true;
      args.push_back(argv[i]);
    }
  }
  static char kRepetitions[] = "--benchmark_repetitions=5";
  static char kAggregatesOnly[] = "--benchmark_report_aggregates_only=true";
  if (!repetitions_given) {
    args.push_back(kRepetitions);
    args.push_back(kAggregatesOnly);
  }
  int bench_argc = static_cast<int>(args.size());

  absl::StatusOr<Bench> bench = ReadBench(selectors_path);
  if (!bench.ok()) {
    std::fprintf(stderr, "cel_benchmark: %s\n", Message(bench.status()).c_str());
    return 2;
  }
  for (const Selector& s : bench->selectors) {
    absl::StatusOr<bool> match = dra::Match(*s.program, *bench->device);
    if (!match.ok()) {
      std::fprintf(stderr, "cel_benchmark: %s: %s\n", s.name.c_str(),
                   Message(match.status()).c_str());
      return 2;
    }
    const Program* program = s.program.get();
    const dra::DeviceView* device = bench->device.get();
    benchmark::RegisterBenchmark(("BM_Match/" + s.name).c_str(),
                                 [program, device](benchmark::State& state) {
                                   for (auto _ : state) {
                                     absl::StatusOr<bool> r = dra::Match(*program, *device);
                                     benchmark::DoNotOptimize(r);
                                   }
                                 })
        ->Unit(benchmark::kNanosecond);
    // Compilation (parse, check, plan, cost estimate): paid once per selector text.
    const std::string expr = s.expr;
    benchmark::RegisterBenchmark(("BM_Compile/" + s.name).c_str(),
                                 [expr](benchmark::State& state) {
                                   for (auto _ : state) {
                                     absl::StatusOr<Program> p = dra::CompileSelector(expr);
                                     benchmark::DoNotOptimize(p);
                                   }
                                 })
        ->Unit(benchmark::kMicrosecond);
  }
  benchmark::Initialize(&bench_argc, args.data());
  MedianReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  if (celgo.empty()) return 0;

  absl::StatusOr<std::string> out = RunCommand(celgo + " bench -corpus '" + selectors_path +
                                               "' -min-time " + celgo_min_time);
  if (!out.ok()) {
    std::fprintf(stderr, "cel_benchmark: %s\n", Message(out.status()).c_str());
    return 1;
  }
  std::printf("\n%-14s %12s %16s %8s %14s %8s  %s\n", "selector", "devlet ns", "cel-go match ns",
              "ratio", "cel-go eval ns", "ratio", "same result");
  double min_ratio = 1e300;
  double min_eval_ratio = 1e300;
  std::stringstream lines(*out);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    nlohmann::json j = nlohmann::json::parse(line);
    std::string name = j.at("name").get<std::string>();
    auto it = reporter.medians().find("BM_Match/" + name);
    if (it == reporter.medians().end()) continue;
    auto sel = std::find_if(bench->selectors.begin(), bench->selectors.end(),
                            [&name](const Selector& s) { return s.name == name; });
    bool ours = sel != bench->selectors.end() && *dra::Match(*sel->program, *bench->device);
    double match_ns = j.at("deviceMatchesNs").get<double>();
    double eval_ns = j.at("evalNs").get<double>();
    double ratio = match_ns / it->second;
    double eval_ratio = eval_ns / it->second;
    min_ratio = std::min(min_ratio, ratio);
    min_eval_ratio = std::min(min_eval_ratio, eval_ratio);
    std::printf("%-14s %12.1f %16.1f %7.1fx %14.1f %7.1fx  %s\n", name.c_str(), it->second,
                match_ns, ratio, eval_ns, eval_ratio,
                ours == j.at("result").get<bool>() ? "yes" : "NO");
  }
  std::printf("\nslowest ratio: %.1fx vs DeviceMatches, %.1fx vs cel-go eval alone (target 5x)\n",
              min_ratio, min_eval_ratio);
  return 0;
}

}  // namespace
}  // namespace devlet::cel

int main(int argc, char** argv) { return devlet::cel::Main(argc, argv); }
