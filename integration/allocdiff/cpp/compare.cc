// allocdiff_compare: devlet's allocator against the upstream Go allocator (the `allocdiff` peer).
//
//   allocdiff_compare cases --peer PATH [--seed 1] [--count 300] [--keep DIR] [--gates A=true,..]
//                     [--adversarial] [--slow-factor 2] [--slow-floor-ms 2]
//     The peer generates seeded problems and solves them; we solve the same objects and fail on
//     any disagreement in outcome (allocated / unschedulable / error) or, when allocated, in the
//     chosen devices, configs and node selectors (upstream's first-fit order defines them).
//     With --gates both sides run with those gates; an alpha allocator gate on
//     (DRADerivedAttributes, DRADeviceCompatibilityGroups) also makes the generator use it.
//     Speed: each case is also timed on both sides (upstream: NewAllocator + Allocate; ours:
//     Scenario::FromObjects + AllocateOn, what devlet-alloc runs), and a case where we are slower
//     than --slow-factor (2) times upstream and slower than --slow-floor-ms (2 ms, below which
//     scheduling noise dominates) fails as SLOW, after two more measurements to rule noise out.
//     Our search gets a deadline of 20x upstream's time (at least 2 s), so a case that explodes
//     fails instead of hanging the run.
//   allocdiff_compare cases --adversarial --peer PATH [--seed 1] [--count 60]
//     The same over the adversarial families (integration/allocdiff/adversarial.go): the
//     32-results limit, firstAvailable near it, unsatisfiable matchAttribute over identical
//     devices, All over 128 devices, eight requests under one matchAttribute, counters that run
//     out at the last device.
//   allocdiff_compare casefiles --peer PATH --dir allocator/tests/cases
//     Every allocator case file that upstream can run as is (no Pod, no DeviceTaintRule, no
//     allocated-state fixtures, no interrupt) goes to the peer with its gates; the peer's
//     outcome must match the file's expectation: the same kind (allocated / unschedulable /
//     error) and, when allocated, the same allocations. This checks the expectations themselves
//     against upstream, so a case file cannot encode our own mistake.
//   allocdiff_compare bench --peer PATH [--nodes 500] [--pods 5000] [--seed 1]
//     The peer writes the workload and runs its scheduling loop; we run the identical loop on the
//     identical workload, check that every pod lands on the same node with the same devices, and
//     print pods/s, Filter p50/p99 per node and the ratio ours/upstream.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <sys/resource.h>
#include <unistd.h>

#include "devlet/allocator/features.h"
#include "devlet/allocator/scenario.h"
#include "devlet/allocator/testing/case_yaml.h"
#include "devlet/cel/quantity.h"
#include "devlet/common/status.h"
#include "devlet/kube/codec.h"
#include "nlohmann/json.hpp"
#include "yaml-cpp/yaml.h"

namespace {

using Json = nlohmann::json;
using devlet::allocator::testing::CaseYamlToJson;
using namespace devlet;  // NOLINT
using namespace devlet::allocator;  // NOLINT

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

int RunPeer(const std::string& command) {
  int rc = std::system(command.c_str());
  if (rc != 0) std::cerr << "allocdiff_compare: peer failed (" << rc << "): " << command << "\n";
  return rc;
}

// Canonical JSON of one allocation for comparison: results sorted, shareIDs dropped,
// quantities compared by value (Go writes canonical forms, we keep the written form).
Json Canonical(Json allocation) {
  Json& results = allocation["devices"]["results"];
  if (results.is_array()) {
    for (Json& r : results) {
      r.erase("shareID");
      if (r.contains("consumedCapacity")) {
        for (auto& [k, v] : r["consumedCapacity"].items()) {
          auto q = cel::Quantity::Parse(v.get<std::string>());
          // Value-normalize: compare against the Go text by parsing both.
          v = q.ok() ? Json(q->ToString()) : v;
        }
      }
    }
    std::sort(results.begin(), results.end(),
              [](const Json& a, const Json& b) { return a.dump() < b.dump(); });
  }
  allocation.erase("allocationTimestamp");
  return allocation;
}

struct Args {
  std::string mode, peer, keep, dir, gates;
  int64_t seed = 1;
  int count = 300, nodes = 500, pods = 5000;
  bool adversarial = false;
  double slow_factor = 2.0;
  double slow_floor_ms = 2.0;
};

// Ours is one run of devlet's side of a case: the outcome and how long it took.
struct Ours {
  std::string kind, detail;
  Json results = Json::array();
  int64_t nanos = 0;
};

Ours RunOurs(const Json& c, const std::string& file, const Features& features,
             std::chrono::nanoseconds budget) {
  Ours ours;
  auto objects = kube::DecodeJson(c["objects"].dump(), {.source = file});
  if (!objects.ok()) {
    ours.kind = "error";
    ours.detail = Message(objects.status());
    return ours;
  }
  // Timed from the decoded objects to the answer, as upstream's NewAllocator + Allocate.
  const auto start = std::chrono::steady_clock::now();
  auto scenario = Scenario::FromObjects(std::move(*objects), features, /*validate=*/false);
  if (!scenario.ok()) {
    ours.nanos = (std::chrono::steady_clock::now() - start).count();
    ours.kind = "error";
    ours.detail = Message(scenario.status());
    return ours;
  }
  AllocateOptions options;
  options.deadline = start + budget;
  options.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(budget);
  NodeOutcome out = scenario->AllocateOn(c["node"].get<std::string>(), options);
  ours.nanos = (std::chrono::steady_clock::now() - start).count();
  switch (out.outcome.kind) {
    case AllocateOutcome::Kind::kAllocated:
      ours.kind = "allocated";
      for (const auto& claim : out.claims) {
        ours.results.push_back(Json::parse(kube::EncodeJson(claim))["status"]["allocation"]);
      }
      break;
    case AllocateOutcome::Kind::kUnschedulable:
      ours.kind = "unschedulable";
      ours.detail = out.outcome.reason;
      break;
    case AllocateOutcome::Kind::kError:
      ours.kind = "error";
      ours.detail = Message(out.outcome.status);
      break;
  }
  return ours;
}

int Cases(const Args& args) {
  std::string dir = args.keep.empty()
                        ? (std::filesystem::temp_directory_path() /
                           ("allocdiff-" + std::to_string(getpid()))).string()
                        : args.keep;
  std::filesystem::create_directories(dir);
  Features features;
  if (!args.gates.empty()) {
    auto parsed = ParseFeatureGates(args.gates);
    if (!parsed.ok()) {
      std::cerr << "--gates: " << Message(parsed.status()) << "\n";
      return 2;
    }
    features = *parsed;
  }
  if (RunPeer(args.peer + " cases -seed " + std::to_string(args.seed) + " -count " +
              std::to_string(args.count) + " -dir " + dir + " -gates '" + args.gates + "'" +
              (args.adversarial ? " -adversarial" : "")) != 0) {
    return 2;
  }
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::map<std::string, int> kinds;
  int mismatches = 0, slow = 0, upstream_timeouts = 0;
  // The slowest case relative to upstream (over the floor), for the summary line.
  double worst_ratio = 0;
  std::string worst_case;
  int64_t ours_total = 0, theirs_total = 0;
  for (const std::string& file : files) {
    Json c = Json::parse(ReadFile(file));
    std::string upstream_kind = c["upstream"]["kind"];
    kinds[upstream_kind]++;
    const std::string family = c.value("family", "random");
    if (upstream_kind == "timeout") {
      // A draw too hard for upstream itself (its own budget ran out): nothing to compare.
      ++upstream_timeouts;
      std::cerr << "SKIP " << file << " (" << family << "): " << c["upstream"].value("error", "")
                << "\n";
      continue;
    }
    const int64_t theirs_nanos = c["upstream"].value("nanos", int64_t{0});
    const auto budget =
        std::max<std::chrono::nanoseconds>(std::chrono::seconds(2),
                                           std::chrono::nanoseconds(theirs_nanos) * 20);
    Ours ours = RunOurs(c, file, features, budget);
    const std::string& ours_kind = ours.kind;
    std::string detail = ours.detail;
    bool same = ours_kind == upstream_kind;
    if (same && ours_kind == "error") {
      // Derived attribute errors are worded exactly as upstream's (names, device, CEL text).
      const std::string theirs = c["upstream"].value("error", "");
      if (theirs.find("derived attribute") != std::string::npos && theirs != detail) {
        same = false;
        detail = "error text differs:\n  upstream: " + theirs + "\n  ours:     " + detail;
      }
    }
    if (same && ours_kind == "allocated") {
      const Json& theirs = c["upstream"]["results"];
      same = theirs.size() == ours.results.size();
      for (size_t i = 0; same && i < theirs.size(); ++i) {
        same = Canonical(theirs[i]) == Canonical(ours.results[i]);
      }
      if (!same) {
        detail = "upstream: " + theirs.dump() + "\nours:     " + ours.results.dump();
      }
    }
    if (!same) {
      ++mismatches;
      std::cerr << "MISMATCH " << file << " (" << family << "): upstream " << upstream_kind
                << " (" << c["upstream"].value("error", "") << "), ours " << ours_kind << "\n  "
                << detail << "\n";
      continue;
    }
    // Speed: slower than slow_factor x upstream and above the floor fails, if it holds on two
    // more measurements (the fastest counts, as on the peer's side).
    const double floor_nanos = args.slow_floor_ms * 1e6;
    auto too_slow = [&](int64_t nanos) {
      return static_cast<double>(nanos) > floor_nanos &&
             static_cast<double>(nanos) > args.slow_factor * static_cast<double>(theirs_nanos);
    };
    for (int again = 0; again < 2 && too_slow(ours.nanos); ++again) {
      ours.nanos = std::min(ours.nanos, RunOurs(c, file, features, budget).nanos);
    }
    ours_total += ours.nanos;
    theirs_total += theirs_nanos;
    if (static_cast<double>(ours.nanos) > floor_nanos && theirs_nanos > 0) {
      const double ratio = static_cast<double>(ours.nanos) / static_cast<double>(theirs_nanos);
      if (ratio > worst_ratio) {
        worst_ratio = ratio;
        worst_case = file;
      }
    }
    if (too_slow(ours.nanos)) {
      ++slow;
      char line[256];
      std::snprintf(line, sizeof line, "ours %.3f ms, upstream %.3f ms (%.1fx, limit %.1fx)",
                    static_cast<double>(ours.nanos) / 1e6,
                    static_cast<double>(theirs_nanos) / 1e6,
                    static_cast<double>(ours.nanos) / static_cast<double>(std::max<int64_t>(theirs_nanos, 1)),
                    args.slow_factor);
      std::cerr << "SLOW " << file << " (" << family << "): " << line << "\n";
    }
  }
  std::cout << "allocdiff: " << files.size() << " cases (seed " << args.seed
            << (args.gates.empty() ? "" : ", gates " + args.gates) << "): ";
  for (const auto& [k, n] : kinds) std::cout << k << "=" << n << " ";
  char times[256];
  std::snprintf(times, sizeof times, "time ours %.1f ms, upstream %.1f ms", ours_total / 1e6,
                theirs_total / 1e6);
  std::cout << "mismatches=" << mismatches << " slow=" << slow << " (" << times;
  if (!worst_case.empty()) {
    std::cout << "; slowest relative to upstream: "
              << std::filesystem::path(worst_case).filename().string() << " " << worst_ratio
              << "x";
  }
  std::cout << ")";
  if (upstream_timeouts > 0) std::cout << " skipped=" << upstream_timeouts;
  std::cout << "\n";
  if (args.keep.empty()) std::filesystem::remove_all(dir);
  return mismatches == 0 && slow == 0 ? 0 : 1;
}

// Strings for every scalar, so that "1" (YAML) and 1 (Go) compare equal.
Json Stringly(const Json& j) {
  if (j.is_object()) {
    Json out = Json::object();
    for (const auto& [k, v] : j.items()) out[k] = Stringly(v);
    return out;
  }
  if (j.is_array()) {
    Json out = Json::array();
    for (const auto& v : j) out.push_back(Stringly(v));
    return out;
  }
  if (j.is_number()) return j.dump();
  return j;
}

int CaseFiles(const Args& args) {
  if (args.dir.empty()) {
    std::cerr << "casefiles: --dir is required\n";
    return 2;
  }
  std::string tmp = (std::filesystem::temp_directory_path() /
                     ("allocdiff-casefiles-" + std::to_string(getpid()))).string();
  std::filesystem::create_directories(tmp);
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(args.dir)) {
    if (e.path().extension() == ".yaml") files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  int checked = 0, skipped = 0, mismatches = 0;
  for (const std::string& file : files) {
    const std::string base = std::filesystem::path(file).filename().string();
    YAML::Node doc;
    try {
      doc = YAML::LoadFile(file);
    } catch (const std::exception& e) {
      std::cerr << base << ": " << e.what() << "\n";
      ++mismatches;
      continue;
    }
    // upstreamDiffers: a documented, deliberate difference (a feature devlet does not implement).
    bool runnable = !doc["allocated"] && !doc["allocatedShared"] && !doc["allocatedCapacity"] &&
                    !doc["interrupt"] && !doc["upstreamDiffers"];
    Json items = Json::array();
    std::string node_name = "node-1";
    Json node = {{"apiVersion", "v1"},
                 {"kind", "Node"},
                 {"metadata",
                  {{"name", "node-1"}, {"labels", {{"region", "region-1"}, {"planet", "earth"}}}}}};
    if (doc["node"]) {
      if (doc["node"].IsScalar()) {
        node_name = doc["node"].as<std::string>();
        node["metadata"]["name"] = node_name;
      } else {
        node_name = doc["node"]["name"].as<std::string>();
        node["metadata"] = {{"name", node_name}, {"labels", Json::object()}};
        if (doc["node"]["labels"]) {
          node["metadata"]["labels"] = CaseYamlToJson(doc["node"]["labels"]);
        }
      }
    }
    bool node_given = false;
    std::string objects_yaml;
    for (const auto& object : doc["objects"]) {
      const std::string kind = object["kind"] ? object["kind"].as<std::string>() : "";
      if (kind == "Pod" || kind == "DeviceTaintRule") runnable = false;
      if (kind == "Node" && object["metadata"]["name"].as<std::string>() == node_name) {
        node_given = true;
      }
      YAML::Emitter emitter;
      emitter << object;
      objects_yaml += "---\n" + std::string(emitter.c_str()) + "\n";
    }
    if (!runnable) {
      ++skipped;
      continue;
    }
    // The objects go through our codec (YAML, typed like the case runner reads them) and out as
    // JSON for the peer.
    auto decoded = kube::Decode(objects_yaml, {.source = base});
    if (!decoded.ok()) {
      std::cerr << "MISMATCH " << base << ": our codec rejects the objects: "
                << Message(decoded.status()) << "\n";
      ++mismatches;
      continue;
    }
    if (!node_given) {
      auto n = kube::DecodeJson(node.dump(), {.source = base});
      if (n.ok()) decoded->insert(decoded->end(), n->begin(), n->end());
    }
    const std::string input = tmp + "/" + base + ".json";
    {
      std::ofstream out(input);
      out << kube::EncodeJsonList(*decoded);
    }
    const std::string output = tmp + "/" + base + ".out";
    std::string gates = doc["gates"] ? doc["gates"].as<std::string>() : "";
    if (RunPeer(args.peer + " run '" + input + "' '" + node_name + "' '" + gates + "' > '" +
                output + "'") != 0) {
      ++mismatches;
      continue;
    }
    ++checked;
    Json theirs = Json::parse(ReadFile(output));
    const std::string upstream_kind = theirs.value("kind", "");
    const YAML::Node expect = doc["expect"];
    std::string want_kind = expect["error"]           ? "error"
                            : expect["unschedulable"] ? "unschedulable"
                                                      : "allocated";
    bool same = upstream_kind == want_kind;
    std::string detail;
    if (same && want_kind == "allocated") {
      Json want = CaseYamlToJson(expect["allocations"]);
      const Json got = theirs.contains("results") ? theirs["results"] : Json::array();
      same = want.size() == got.size();
      for (size_t i = 0; same && i < want.size(); ++i) {
        same = Stringly(Canonical(want[i])) == Stringly(Canonical(got[i]));
      }
      if (!same) detail = "\n  upstream: " + got.dump() + "\n  expected: " + want.dump();
    }
    if (same && want_kind == "error") {
      // Error cases check the text too: the expected substring must be in upstream's error.
      same = theirs.value("error", "").find(expect["error"].as<std::string>()) != std::string::npos;
      if (!same) detail = "\n  expected error text: " + expect["error"].as<std::string>();
    }
    if (!same) {
      ++mismatches;
      std::cerr << "MISMATCH " << base << ": expected " << want_kind << ", upstream "
                << upstream_kind << " " << theirs.value("error", "") << detail << "\n";
    }
  }
  std::filesystem::remove_all(tmp);
  std::cout << "casefiles: " << files.size() << " files, " << checked
            << " checked against upstream, " << skipped
            << " skipped (Pod, DeviceTaintRule, allocated-state fixtures, interrupt or upstreamDiffers), "
               "mismatches="
            << mismatches << "\n";
  return mismatches == 0 ? 0 : 1;
}

int64_t Percentile(std::vector<int64_t>& v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * static_cast<double>(v.size() - 1))];
}

// CpuSeconds is the user+system CPU time of this process so far (the loop is single-threaded).
double CpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return seconds(ru.ru_utime) + seconds(ru.ru_stime);
}

int Bench(const Args& args) {
  std::string dir = (std::filesystem::temp_directory_path() /
                     ("allocbench-" + std::to_string(getpid()))).string();
  std::filesystem::create_directories(dir);
  std::string workload = dir + "/workload.json", stats_path = dir + "/stats.json";
  std::cout << "upstream: running k8s.io/dynamic-resource-allocation v0.37.2 ("
            << args.nodes << " nodes x 8 GPUs + 4 NICs, " << args.pods << " pods)...\n"
            << std::flush;
  if (RunPeer(args.peer + " bench -nodes " + std::to_string(args.nodes) + " -pods " +
              std::to_string(args.pods) + " -seed " + std::to_string(args.seed) + " -workload " +
              workload + " -stats " + stats_path) != 0) {
    return 2;
  }
  Json w = Json::parse(ReadFile(workload));
  Json theirs = Json::parse(ReadFile(stats_path));
  auto cluster = kube::DecodeJson(w["cluster"].dump());
  if (!cluster.ok()) {
    std::cerr << Message(cluster.status()) << "\n";
    return 2;
  }
  std::vector<kube::DeviceClass> classes;
  std::vector<kube::ResourceSlice> slices;
  std::vector<kube::Node> nodes;
  for (auto& o : *cluster) {
    if (auto* c = std::get_if<kube::DeviceClass>(&o)) classes.push_back(*c);
    if (auto* s = std::get_if<kube::ResourceSlice>(&o)) slices.push_back(*s);
    if (auto* n = std::get_if<kube::Node>(&o)) nodes.push_back(*n);
  }
  std::sort(nodes.begin(), nodes.end(),
            [](const auto& a, const auto& b) { return a.metadata.name < b.metadata.name; });
  std::vector<std::vector<kube::ResourceClaim>> pods;
  for (const Json& p : w["pods"]) {
    auto claims = kube::DecodeJson(p.dump());
    if (!claims.ok()) {
      std::cerr << Message(claims.status()) << "\n";
      return 2;
    }
    pods.emplace_back();
    for (auto& o : *claims) pods.back().push_back(std::get<kube::ResourceClaim>(o));
  }

  const double cpu_start = CpuSeconds();
  auto start = std::chrono::steady_clock::now();
  auto snapshot = Snapshot::Build(Features{}, classes, slices);
  if (!snapshot.ok()) {
    std::cerr << Message(snapshot.status()) << "\n";
    return 2;
  }
  AllocatedState state;
  std::vector<int64_t> latencies;
  latencies.reserve(pods.size() * nodes.size());
  std::vector<std::string> placements, devices;
  int scheduled = 0;
  for (const auto& claims : pods) {
    std::vector<const kube::ResourceClaim*> ptrs;
    for (const auto& c : claims) ptrs.push_back(&c);
    std::string chosen;
    std::vector<kube::AllocationResult> chosen_results;
    for (const kube::Node& node : nodes) {
      auto t0 = std::chrono::steady_clock::now();
      AllocateOutcome out = Allocate(**snapshot, node, ptrs, state);
      latencies.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(
                              std::chrono::steady_clock::now() - t0)
                              .count());
      if (out.kind == AllocateOutcome::Kind::kError) {
        std::cerr << "error: " << Message(out.status) << "\n";
        return 2;
      }
      if (out.kind == AllocateOutcome::Kind::kAllocated && chosen.empty()) {
        chosen = node.metadata.name;
        chosen_results = std::move(out.results);
      }
    }
    std::string d;
    if (!chosen.empty()) {
      ++scheduled;
      for (const auto& r : chosen_results) {
        (void)state.Add(r);
        for (const auto& x : r.devices.results) d += x.request + "=" + x.pool + "/" + x.device + " ";
      }
    }
    placements.push_back(chosen);
    devices.push_back(d);
  }
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double cpu_seconds = CpuSeconds() - cpu_start;
  int64_t p50 = Percentile(latencies, 0.5), p99 = Percentile(latencies, 0.99);
  int disagreements = 0;
  for (size_t i = 0; i < pods.size(); ++i) {
    if (placements[i] != theirs["placements"][i].get<std::string>() ||
        devices[i] != theirs["devices"][i].get<std::string>()) {
      if (disagreements++ < 5) {
        std::cerr << "pod " << i << ": upstream " << theirs["placements"][i] << " "
                  << theirs["devices"][i] << ", ours " << placements[i] << " " << devices[i]
                  << "\n";
      }
    }
  }
  const double their_pps = theirs["podsPerSec"].get<double>();
  const double our_pps = static_cast<double>(pods.size()) / seconds;
  const double their_cpu = theirs.value("cpuSeconds", 0.0);
  const double n = static_cast<double>(pods.size());
  char line[512];
  std::cout << "scheduling loop: " << args.nodes << " nodes, " << pods.size()
            << " pods, Filter on every node per pod, first fit, commit\n";
  std::snprintf(line, sizeof line, "%-9s %9s %9s %9s %9s %11s %12s %12s\n", "side", "scheduled",
                "wall s", "cpu s", "pods/s", "pods/cpu-s", "Filter p50", "Filter p99");
  std::cout << line;
  std::snprintf(line, sizeof line, "%-9s %9d %9.2f %9.2f %9.1f %11.1f %9.2f us %9.2f us\n",
                "upstream", theirs["scheduled"].get<int>(), theirs["seconds"].get<double>(),
                their_cpu, their_pps, their_cpu > 0 ? n / their_cpu : 0.0,
                theirs["filterP50Ns"].get<double>() / 1000.0,
                theirs["filterP99Ns"].get<double>() / 1000.0);
  std::cout << line;
  std::snprintf(line, sizeof line, "%-9s %9d %9.2f %9.2f %9.1f %11.1f %9.2f us %9.2f us\n",
                "devlet", scheduled, seconds, cpu_seconds, our_pps,
                cpu_seconds > 0 ? n / cpu_seconds : 0.0, static_cast<double>(p50) / 1000.0,
                static_cast<double>(p99) / 1000.0);
  std::cout << line;
  std::snprintf(line, sizeof line,
                "ratio devlet/upstream: %.1fx throughput (wall), %.1fx (CPU time), %.1fx Filter "
                "p50, %.1fx Filter p99\n",
                our_pps / their_pps,
                cpu_seconds > 0 && their_cpu > 0 ? their_cpu / cpu_seconds : 0.0,
                theirs["filterP50Ns"].get<double>() / static_cast<double>(std::max<int64_t>(p50, 1)),
                theirs["filterP99Ns"].get<double>() / static_cast<double>(std::max<int64_t>(p99, 1)));
  std::cout << line;
  std::cout << "placements: " << (disagreements == 0 ? "identical" : "DIFFER") << " ("
            << disagreements << " of " << pods.size() << " pods differ)\n";
  std::filesystem::remove_all(dir);
  return disagreements == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (argc < 2) {
    std::cerr << "usage: allocdiff_compare cases|bench --peer PATH [options]\n";
    return 2;
  }
  args.mode = argv[1];
  for (int i = 2; i < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--adversarial") {
      args.adversarial = true;
      --i;  // no value
      continue;
    }
    if (i + 1 >= argc) {
      std::cerr << flag << " needs a value\n";
      return 2;
    }
    std::string value = argv[i + 1];
    if (flag == "--peer") args.peer = value;
    else if (flag == "--seed") args.seed = std::stoll(value);
    else if (flag == "--count") args.count = std::stoi(value);
    else if (flag == "--nodes") args.nodes = std::stoi(value);
    else if (flag == "--pods") args.pods = std::stoi(value);
    else if (flag == "--keep") args.keep = value;
    else if (flag == "--gates") args.gates = value;
    else if (flag == "--dir") args.dir = value;
    else if (flag == "--slow-factor") args.slow_factor = std::stod(value);
    else if (flag == "--slow-floor-ms") args.slow_floor_ms = std::stod(value);
    else {
      std::cerr << "unknown flag " << flag << "\n";
      return 2;
    }
  }
  if (args.peer.empty()) {
    std::cerr << "--peer is required\n";
    return 2;
  }
  if (args.mode == "cases") return Cases(args);
  if (args.mode == "bench") return Bench(args);
  if (args.mode == "casefiles") return CaseFiles(args);
  std::cerr << "unknown mode " << args.mode << "\n";
  return 2;
}
