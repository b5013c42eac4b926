// devlet-extender end to end: the real HTTP server on loopback, driven with the bodies
// kube-scheduler sends a nodeCacheCapable extender (ExtenderArgs with NodeNames), over keep-alive
// connections. Prints, per cluster size and mode, p50/p99 of filter, prioritize and the pair for
// one pod over all nodes; then sustained requests per second with N keep-alive connections.
//
//   build-extbench/allocator/extender/extender_benchmark --nodes=500,5000 --seconds=5
//
// Every reply is checked (no Error, nodes pass, one score per node): a wrong answer is exit 1, so
// the smoke run in ctest catches a broken extender as well as a broken benchmark.
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cluster.h"
#include "devlet/common/status.h"
#include "devlet/extender/extender.h"
#include "devlet/extender/server.h"
#include "nlohmann/json.hpp"

namespace devlet::extender::bench {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

struct Flags {
  std::vector<int> nodes = {500, 5000};
  std::vector<Mode> modes = {Mode::kScore, Mode::kAllocate};
  int iterations = 200;     // filter+prioritize pairs per pod kind
  int connections = 4;      // sustained phase: keep-alive connections
  double seconds = 5;       // sustained phase duration (0 skips it)
  int server_threads = 16;  // --threads of the server
  int parallelism = 0;      // --parallelism of the verbs (0: hardware concurrency)
  bool reuse = true;        // Options::reuse_results
  int churn = 1;            // claims moved to another node before each filter (0: none)
};

[[noreturn]] void Usage(const std::string& problem) {
  std::fprintf(stderr,
               "extender_benchmark: %s\n"
               "usage: extender_benchmark [--nodes=500,5000] [--modes=score,allocate]\n"
               "  [--iterations=200] [--connections=4] [--seconds=5] [--server-threads=16]\n"
               "  [--parallelism=0] [--reuse=1] [--churn=1]\n",
               problem.c_str());
  std::exit(2);
}

std::vector<std::string> Split(std::string_view text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    out.emplace_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

int ParseInt(const std::string& flag, const std::string& text, int min) {
  char* end = nullptr;
  long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < min || v > 1000000) {
    Usage(flag + ": want an integer >= " + std::to_string(min) + ", got \"" + text + "\"");
  }
  return static_cast<int>(v);
}

Flags ParseFlags(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    size_t eq = arg.find('=');
    if (arg.rfind("--", 0) != 0 || eq == std::string::npos) Usage("bad argument \"" + arg + "\"");
    std::string name = arg.substr(0, eq);
    std::string value = arg.substr(eq + 1);
    if (name == "--nodes") {
      flags.nodes.clear();
      for (const auto& v : Split(value)) flags.nodes.push_back(ParseInt(name, v, 1));
    } else if (name == "--modes") {
      flags.modes.clear();
      for (const auto& v : Split(value)) {
        absl::StatusOr<Mode> mode = ParseMode(v);
        if (!mode.ok()) Usage(Message(mode.status()));
        flags.modes.push_back(*mode);
      }
    } else if (name == "--iterations") {
      flags.iterations = ParseInt(name, value, 1);
    } else if (name == "--connections") {
      flags.connections = ParseInt(name, value, 1);
    } else if (name == "--seconds") {
      char* end = nullptr;
      flags.seconds = std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0' || !(flags.seconds >= 0)) Usage("--seconds: bad value");
    } else if (name == "--server-threads") {
      flags.server_threads = ParseInt(name, value, 1);
    } else if (name == "--parallelism") {
      flags.parallelism = ParseInt(name, value, 0);
    } else if (name == "--reuse") {
      flags.reuse = ParseInt(name, value, 0) != 0;
    } else if (name == "--churn") {
      flags.churn = ParseInt(name, value, 0);
    } else {
      Usage("unknown flag " + name);
    }
  }
  return flags;
}

// CpuMicros is the process's CPU time (all threads): on a shared, loaded machine wall-clock
// latency mostly measures waiting for a core, so the latency table also reports CPU per request.
double CpuMicros() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

double Micros(Clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

// Percentile of sorted samples (nearest rank).
double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  size_t rank = static_cast<size_t>(std::ceil(p * static_cast<double>(sorted.size())));
  return sorted[std::min(sorted.size() - 1, rank == 0 ? 0 : rank - 1)];
}

void PrintRow(int nodes, std::string_view mode, std::string_view pod, std::string_view verb,
              std::vector<double> samples, std::vector<double> cpu) {
  std::sort(samples.begin(), samples.end());
  std::sort(cpu.begin(), cpu.end());
  std::printf("%6d  %-8s  %-13s  %-10s  %6zu  %9.3f  %9.3f  %9.3f  %9.3f\n", nodes,
              std::string(mode).c_str(), std::string(pod).c_str(), std::string(verb).c_str(),
              samples.size(), Percentile(samples, 0.5) / 1000, Percentile(samples, 0.99) / 1000,
              samples.back() / 1000, Percentile(cpu, 0.5) / 1000);
  std::fflush(stdout);
}

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "extender_benchmark: FAILED: %s\n", what.c_str());
  std::exit(1);
}

// Checked posts: a reply that is not what the scheduler needs is a failure of the run.
class Driver {
 public:
  Driver(int port, int nodes) : client_("127.0.0.1", port), nodes_(nodes) {
    client_.set_keep_alive(true);
    // Go's net/http (the scheduler's client) sets TCP_NODELAY; without it the body, written
    // after the headers, waits ~40 ms for the server's delayed ACK.
    client_.set_tcp_nodelay(true);
    // Go's transport asks for gzip unless compression is disabled.
    client_.set_default_headers({{"Accept-Encoding", "gzip"}});
    client_.set_read_timeout(std::chrono::seconds(60));
    client_.set_write_timeout(std::chrono::seconds(60));
  }

  void Filter(const std::string& body) {
    json reply = Post("/devlet/filter", body);
    if (!reply.is_object() || reply.value("Error", "?") != "") {
      Fail("filter reply has an error: " + reply.dump().substr(0, 300));
    }
    const json& passed = reply["NodeNames"];
    if (!passed.is_array() || passed.empty()) Fail("filter passed no node");
  }

  void Prioritize(const std::string& body) {
    json reply = Post("/devlet/prioritize", body);
    if (!reply.is_array() || reply.size() != static_cast<size_t>(nodes_)) {
      Fail("prioritize did not score every node: " + reply.dump().substr(0, 300));
    }
    bool some_positive = false;
    for (const auto& entry : reply) some_positive |= entry.value("Score", 0) > 0;
    if (!some_positive) Fail("prioritize scored every node 0");
  }

 private:
  json Post(const std::string& path, const std::string& body) {
    auto res = client_.Post(path, body, "application/json");
    if (!res) Fail("no response for " + path + ": " + httplib::to_string(res.error()));
    if (res->status != 200) Fail(path + ": HTTP " + std::to_string(res->status) + ": " + res->body);
    json parsed = json::parse(res->body, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded()) Fail(path + ": reply is not JSON");
    return parsed;
  }

  httplib::Client client_;
  int nodes_;
};

// Churn moves `flags.churn` allocated claims one node on, as binds do between two pods: the
// nodes they leave and reach change, the others not (what per-node result reuse relies on).
void Churn(const Flags& flags, int nodes, ClusterState& state, int& step) {
  for (int c = 0; c < flags.churn; ++c) {
    absl::Status applied = state.Apply(ChurnClaim(c, (step * flags.churn + c) % nodes));
    if (!applied.ok()) Fail(Message(applied));
  }
  ++step;
}

void RunLatency(const Flags& flags, int nodes, Mode mode, int port,
                const std::vector<std::string>& bodies, ClusterState& state) {
  int step = 0;
  const std::string_view mode_name = mode == Mode::kScore ? "score" : "allocate";
  Driver driver(port, nodes);
  const auto kinds = AllPodKinds();
  // Warm up: connections, allocator memoization, page faults.
  for (int w = 0; w < 3; ++w) {
    for (const auto& body : bodies) {
      driver.Filter(body);
      driver.Prioritize(body);
    }
  }
  // [verb][0: wall, 1: cpu] over all kinds; verb 0 filter, 1 prioritize, 2 both.
  std::vector<double> all[3][2];
  const char* verbs[3] = {"filter", "prioritize", "both"};
  for (size_t k = 0; k < kinds.size(); ++k) {
    std::vector<double> mine[3][2];
    for (int i = 0; i < flags.iterations; ++i) {
      Churn(flags, nodes, state, step);
      const double c0 = CpuMicros();
      const auto t0 = Clock::now();
      driver.Filter(bodies[k]);
      const auto t1 = Clock::now();
      const double c1 = CpuMicros();
      driver.Prioritize(bodies[k]);
      const auto t2 = Clock::now();
      const double c2 = CpuMicros();
      const double wall[3] = {Micros(t1 - t0), Micros(t2 - t1), Micros(t2 - t0)};
      const double cpu[3] = {c1 - c0, c2 - c1, c2 - c0};
      for (int v = 0; v < 3; ++v) {
        mine[v][0].push_back(wall[v]);
        mine[v][1].push_back(cpu[v]);
      }
    }
    for (int v = 0; v < 3; ++v) {
      PrintRow(nodes, mode_name, PodKindName(kinds[k]), verbs[v], mine[v][0], mine[v][1]);
      for (int w = 0; w < 2; ++w) {
        all[v][w].insert(all[v][w].end(), mine[v][w].begin(), mine[v][w].end());
      }
    }
  }
  for (int v = 0; v < 3; ++v) PrintRow(nodes, mode_name, "all", verbs[v], all[v][0], all[v][1]);
}

void RunSustained(const Flags& flags, int nodes, Mode mode, int port,
                  const std::vector<std::string>& bodies) {
  if (flags.seconds <= 0) return;
  const std::string_view mode_name = mode == Mode::kScore ? "score" : "allocate";
  std::atomic<bool> stop{false};
  std::vector<std::vector<double>> samples(static_cast<size_t>(flags.connections));
  std::vector<std::thread> threads;
  const auto start = Clock::now();
  for (int c = 0; c < flags.connections; ++c) {
    threads.emplace_back([&, c] {
      Driver driver(port, nodes);
      auto& mine = samples[static_cast<size_t>(c)];
      for (size_t i = static_cast<size_t>(c); !stop.load(); ++i) {
        const std::string& body = bodies[i % bodies.size()];
        auto t0 = Clock::now();
        driver.Filter(body);
        auto t1 = Clock::now();
        driver.Prioritize(body);
        auto t2 = Clock::now();
        mine.push_back(Micros(t1 - t0));
        mine.push_back(Micros(t2 - t1));
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(flags.seconds));
  stop = true;
  for (auto& t : threads) t.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  std::vector<double> all;
  for (const auto& s : samples) all.insert(all.end(), s.begin(), s.end());
  std::sort(all.begin(), all.end());
  std::printf("%6d  %-8s  sustained: %d keep-alive connections, %.1f s: %zu requests, %.1f req/s "
              "(filter+prioritize alternating), p50 %.3f ms, p99 %.3f ms\n",
              nodes, std::string(mode_name).c_str(), flags.connections, elapsed, all.size(),
              static_cast<double>(all.size()) / elapsed, Percentile(all, 0.5) / 1000,
              Percentile(all, 0.99) / 1000);
  std::fflush(stdout);
}

int Main(int argc, char** argv) {
  const Flags flags = ParseFlags(argc, argv);
  std::printf("hardware threads: %u; server threads %d; parallelism %d; reuse %d; churn %d\n",
              std::thread::hardware_concurrency(), flags.server_threads, flags.parallelism,
              flags.reuse ? 1 : 0, flags.churn);
  std::printf("%6s  %-8s  %-13s  %-10s  %6s  %9s  %9s  %9s  %9s\n", "nodes", "mode", "pod", "verb",
              "n", "p50 ms", "p99 ms", "max ms", "cpu p50");
  for (int nodes : flags.nodes) {
    ClusterSpec spec{.nodes = nodes};
    ClusterState state{allocator::Features{}};
    const auto build_start = Clock::now();
    absl::Status populated = Populate(spec, state);
    if (!populated.ok()) Fail(Message(populated));
    {
      // Slice events are collected and applied by the first reader: count that in.
      const size_t want = state.num_slices();
      std::shared_lock lock(state.mutex());
      if (state.snapshot_locked().num_slices() != want) Fail("snapshot is stale");
    }
    std::printf("# %d nodes: %zu slices applied in %.2f s\n", nodes, state.num_slices(),
                std::chrono::duration<double>(Clock::now() - build_start).count());
    std::vector<std::string> bodies;
    for (PodKind kind : AllPodKinds()) bodies.push_back(ExtenderArgsJson(kind, spec));
    std::printf("# ExtenderArgs body: %zu bytes\n", bodies[0].size());
    for (Mode mode : flags.modes) {
      MemoryWriter writer(state);
      Extender extender(
          state, writer,
          {.mode = mode, .parallelism = flags.parallelism, .reuse_results = flags.reuse});
      Server server(extender, {.host = "127.0.0.1",
                               .port = 0,
                               .prefix = "/devlet",
                               .threads = flags.server_threads});
      absl::Status started = server.Start();
      if (!started.ok()) Fail(Message(started));
      RunLatency(flags, nodes, mode, server.port(), bodies, state);
      RunSustained(flags, nodes, mode, server.port(), bodies);
      server.Stop();
    }
  }
  return 0;
}

}  // namespace
}  // namespace devlet::extender::bench

int main(int argc, char** argv) { return devlet::extender::bench::Main(argc, argv); }
