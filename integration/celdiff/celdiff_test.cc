// Differential test: devlet's DRA CEL engine against Kubernetes' (k8s.io/dynamic-resource-allocation
// /cel v0.37.2, through the Go program celdiff-oracle in this folder).
//
// The oracle reads corpus.txt (devices and hand-written selectors), adds seeded random selectors
// from a grammar (random.go), evaluates every selector against every device, and prints the
// devices and the outcomes as JSON lines. This test compiles and evaluates the same selectors on
// the same devices with dra::CompileSelector / dra::Match and fails on any disagreement in the
// compile outcome (compiles or not), the estimated cost, the result (match or not), error-ness, or
// the runtime cost (CELDIFF_LENIENT_COST=1 only reports runtime-cost differences). Named runtime
// cost exceptions, each counted in the summary line (see README.md):
//  - order-dependent: cel-go iterates Go maps in a random order, so a short-circuiting
//    comprehension over a map may cost differently per evaluation; the oracle evaluates such
//    selectors repeatedly and marks those whose cost varied: their costs are not compared (no
//    implementation can match a random quantity; a sampled range would make the test flaky);
//  - tracker panic: cel-go's ext.Lists cost tracker panics on distinct() of an error value (an
//    "internal error" that ends evaluation early; see known_disagreements.txt).
// The estimated maximum cost and the compile and runtime error texts must agree too (CELDIFF_DUMP
// lists the differing texts).
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "devlet/cel/dra.h"
#include "devlet/cel/quantity.h"
#include "devlet/common/status.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

#ifndef CELDIFF_ORACLE
#error "CELDIFF_ORACLE (path of the celdiff-oracle binary) must be defined by the build"
#endif
#ifndef CELDIFF_KNOWN
#error "CELDIFF_KNOWN (path of known_disagreements.txt) must be defined by the build"
#endif
#ifndef CELDIFF_CORPUS
#error "CELDIFF_CORPUS (path of corpus.txt) must be defined by the build"
#endif
#ifndef CELDIFF_SYNTAX
#error "CELDIFF_SYNTAX (path of syntax.txt) must be defined by the build"
#endif
#ifndef CELDIFF_SEEDS
#error "CELDIFF_SEEDS (path of mutation_seeds.txt) must be defined by the build"
#endif

namespace devlet::cel {
namespace {

using nlohmann::json;

// Runs `command` and returns its standard output.
absl::StatusOr<std::string> RunCommand(const std::string& command) {
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return Internal("cannot run " + command);
  std::string out;
  char buffer[1 << 16];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) out.append(buffer, n);
  int rc = pclose(pipe);
  if (rc != 0) return Internal(command + " exited with status " + std::to_string(rc));
  return out;
}

struct Device {
  std::string name;
  std::unique_ptr<dra::SimpleDevice> view;
};

absl::StatusOr<std::vector<Device>> BuildDevices(const json& devices) {
  std::vector<Device> out;
  for (const json& d : devices) {
    Device device;
    device.name = d.at("name").get<std::string>();
    device.view = std::make_unique<dra::SimpleDevice>(d.at("driver").get<std::string>());
    if (d.contains("allowMultipleAllocations")) {
      device.view->set_allow_multiple_allocations(d.at("allowMultipleAllocations").get<bool>());
    }
    for (const auto& [name, attr] : d.at("attributes").items()) {
      if (attr.contains("int")) {
        device.view->SetInt(name, attr.at("int").get<int64_t>());
      } else if (attr.contains("bool")) {
        device.view->SetBool(name, attr.at("bool").get<bool>());
      } else if (attr.contains("string")) {
        device.view->SetString(name, attr.at("string").get<std::string>());
      } else if (attr.contains("version")) {
        device.view->SetVersion(name, attr.at("version").get<std::string>());
      } else if (attr.contains("ints")) {
        device.view->SetInts(name, attr.at("ints").get<std::vector<int64_t>>());
      } else if (attr.contains("bools")) {
        device.view->SetBools(name, attr.at("bools").get<std::vector<bool>>());
      } else if (attr.contains("strings")) {
        device.view->SetStrings(name, attr.at("strings").get<std::vector<std::string>>());
      } else if (attr.contains("versions")) {
        device.view->SetVersions(name, attr.at("versions").get<std::vector<std::string>>());
      } else {
        return InvalidArgument("device " + device.name + ": attribute " + name + ": unknown type");
      }
    }
    for (const auto& [name, quantity] : d.at("capacity").items()) {
      DEVLET_RETURN_IF_ERROR(device.view->SetCapacity(name, quantity.get<std::string>()));
    }
    out.push_back(std::move(device));
  }
  return out;
}

// Known disagreements (known_disagreements.txt): exact expressions grouped under "reason:" lines.
// A listed expression that disagrees is tolerated; one that agrees everywhere, or that no longer
// occurs in the run, fails the test so that the list only ever shrinks with the engine's fixes.
struct Known {
  std::map<std::string, std::string> reason_by_expr;
  std::map<std::string, bool> disagreed;  // expr -> disagreed at least once in this run
};

absl::StatusOr<Known> LoadKnown(const std::string& path) {
  FILE* f = fopen(path.c_str(), "r");
  if (f == nullptr) return NotFound("cannot read " + path);
  Known known;
  std::string reason;
  char buffer[1 << 16];
  while (fgets(buffer, sizeof(buffer), f) != nullptr) {
    std::string line(buffer);
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    if (line.rfind("reason:", 0) == 0) {
      reason = line.substr(7);
      continue;
    }
    if (reason.empty()) {
      fclose(f);
      return InvalidArgument("known disagreement without a reason: " + line);
    }
    known.reason_by_expr[line] = reason;
  }
  fclose(f);
  return known;
}

struct Tally {
  int expressions = 0;
  int evaluations = 0;
  int compile_errors = 0;
  int matches = 0;
  int non_matches = 0;
  int errors = 0;
  int disagreements = 0;
  int known = 0;
  int message_differences = 0;
  int compile_message_differences = 0;
  int cost_differences = 0;
  int order_dependent_costs = 0;
  int tracker_panics = 0;
  int estimate_differences = 0;
  int syntax_errors = 0;        // Kubernetes reports a syntax error
  int syntax_texts_agree = 0;   // ... and devlet's text is the same
};

// RunOracle runs celdiff-oracle eval and returns its JSON lines: the devices first, then one line
// per expression with Kubernetes' outcome on each device.
absl::StatusOr<std::vector<json>> RunOracle(int random, int seed, bool with_corpus,
                                            const std::string& corpus, int mutations) {
  std::string command = std::string(CELDIFF_ORACLE) + " eval -corpus '" + corpus +
                        "' -random " + std::to_string(random) + " -seed " + std::to_string(seed) +
                        (with_corpus ? "" : " -selectors=false");
  if (mutations > 0) {
    command += " -mutate " + std::to_string(mutations) + " -mutate-from '" CELDIFF_SEEDS "'";
  }
  DEVLET_ASSIGN_OR_RETURN(std::string output, RunCommand(command));
  std::vector<json> lines;
  size_t start = 0;
  while (start < output.size()) {
    size_t end = output.find('\n', start);
    if (end == std::string::npos) {
      end = output.size();
    }
    if (end > start) {
      lines.push_back(json::parse(output.substr(start, end - start)));
    }
    start = end + 1;
  }
  return lines;
}

std::string OneLine(std::string text) {
  for (size_t pos = 0; (pos = text.find('\n', pos)) != std::string::npos;) {
    text.replace(pos, 1, "\\n");
  }
  return text;
}

// Differential compares the oracle's lines with the engine, one expression at a time, and counts
// the outcomes per source kind ("corpus", "random", "syntax", "mutation").
class Differential {
 public:
  Differential(Known* known, bool verbose) : known_(known), verbose_(verbose) {
    // CELDIFF_DUMP=FILE appends every disagreement to FILE (a starting point for the known list).
    const char* dump_path = std::getenv("CELDIFF_DUMP");
    dump_ = dump_path != nullptr ? fopen(dump_path, "a") : nullptr;
  }

  ~Differential() {
    if (dump_ != nullptr) {
      fclose(dump_);
    }
    if (reported_ > 60) {
      ADD_FAILURE() << (reported_ - 60) << " more disagreements not shown";
    }
  }

  // Expression compares one oracle line: compile outcome or error text, estimated cost, and the
  // result and cost on every device.
  void Expression(const json& line, const std::string& kind, const std::vector<Device>& devices) {
    const std::string expr = line.at("expr").get<std::string>();
    Tally& t = tallies_[kind];
    ++t.expressions;
    absl::StatusOr<Program> program = dra::CompileSelector(expr);
    const bool is_known = known_->reason_by_expr.count(expr) > 0;
    if (is_known) {
      known_->disagreed.try_emplace(expr, false);
    }
    if (!CompileAgrees(line, expr, program, is_known, t) || !program.ok()) {
      return;
    }
    // The estimated maximum cost decides whether the API server accepts the selector: it must be
    // Kubernetes' number (the oracle omits it when it is 0).
    const uint64_t want_estimate = line.value("maxCost", uint64_t{0});
    if (want_estimate != program->estimated_cost().max) {
      ++t.estimate_differences;
      Disagree(t, expr, is_known,
               Source(line) + ": `" + expr + "`: estimated cost differs: kubernetes " +
                   std::to_string(want_estimate) + ", devlet " +
                   std::to_string(program->estimated_cost().max));
    }
    const json& results = line.at("results");
    for (size_t d = 0; d < devices.size(); ++d) {
      Evaluation(line, expr, *program, results.at(d), devices[d], is_known, t);
    }
  }

  void Print() const {
    for (const auto& [kind, t] : tallies_) {
      std::printf(
          "celdiff %-6s: %d expressions (%d fail to compile), %d evaluations (%d match, %d no "
          "match, %d error): %d disagreements, %d known; costs: %d order-dependent (not "
          "compared), %d tracker panics, %d differ (lenient); %d estimated costs, %d compile "
          "error texts, %d runtime error texts differ; %d syntax errors, %d texts equal\n",
          kind.c_str(), t.expressions, t.compile_errors, t.evaluations, t.matches, t.non_matches,
          t.errors, t.disagreements, t.known, t.order_dependent_costs, t.tracker_panics,
          t.cost_differences, t.estimate_differences, t.compile_message_differences,
          t.message_differences, t.syntax_errors, t.syntax_texts_agree);
    }
  }

 private:
  static std::string Source(const json& line) { return line.at("source").get<std::string>(); }

  void Report(const std::string& text) {
    if (dump_ != nullptr) {
      fprintf(dump_, "%s\n", text.c_str());
    }
    if (++reported_ <= 60) {
      ADD_FAILURE() << text;
    }
  }

  // A disagreement: tolerated (counted as known) for a listed expression, reported otherwise.
  void Disagree(Tally& t, const std::string& expr, bool is_known, const std::string& text) {
    if (is_known) {
      known_->disagreed[expr] = true;
      ++t.known;
    } else {
      ++t.disagreements;
      Report(text);
    }
  }

  // CompileAgrees compares whether the expression compiles and, when it does not, the error text
  // (Kubernetes shows it to the user at claim validation: it must be the same).
  bool CompileAgrees(const json& line, const std::string& expr,
                     const absl::StatusOr<Program>& program, bool is_known, Tally& t) {
    const bool go_compiles = !line.contains("compileError");
    if (!go_compiles) {
      ++t.compile_errors;
    }
    if (go_compiles != program.ok()) {
      Disagree(
          t, expr, is_known,
          Source(line) + ": `" + expr + "`: compile outcome differs: kubernetes " +
              (go_compiles ? "compiles" : "fails: " + line.at("compileError").get<std::string>()) +
              "; devlet " + (program.ok() ? "compiles" : "fails: " + Message(program.status())));
      return false;
    }
    if (go_compiles) {
      return true;
    }
    const std::string want = line.at("compileError").get<std::string>();
    const bool syntax = want.find("Syntax error: ") != std::string::npos;
    t.syntax_errors += syntax;
    t.syntax_texts_agree += syntax && want == Message(program.status());
    if (want != Message(program.status())) {
      ++t.compile_message_differences;
      Disagree(t, expr, is_known,
               Source(line) + ": `" + expr + "`: compile error text differs:\nkubernetes: " + want +
                   "\ndevlet:     " + Message(program.status()));
      if (dump_ != nullptr) {
        fprintf(dump_, "compile error text: %s\n  kubernetes: %s\n  devlet:     %s\n", expr.c_str(),
                OneLine(want).c_str(), OneLine(Message(program.status())).c_str());
      }
    }
    return true;
  }

  // Evaluation compares the result (or error text) and the runtime cost on one device.
  void Evaluation(const json& line, const std::string& expr, const Program& program,
                  const json& want, const Device& device, bool is_known, Tally& t) {
    ++t.evaluations;
    uint64_t cost = 0;
    absl::StatusOr<bool> got = dra::Match(program, *device.view, {}, &cost);
    std::string want_text;
    bool agree;
    if (want.contains("error")) {
      ++t.errors;
      want_text = "error: " + want.at("error").get<std::string>();
      agree = !got.ok();
      // Kubernetes reports the text with the pod (devlet may add context around it).
      if (agree &&
          Message(got.status()).find(want.at("error").get<std::string>()) == std::string::npos) {
        agree = false;
        want_text += " (devlet's text differs)";
        ++t.message_differences;
        if (dump_ != nullptr) {
          fprintf(dump_, "runtime error text: %s on %s\n  kubernetes: %s\n  devlet:     %s\n",
                  expr.c_str(), device.name.c_str(), want.at("error").get<std::string>().c_str(),
                  Message(got.status()).c_str());
        }
      }
    } else {
      bool match = want.at("match").get<bool>();
      ++(match ? t.matches : t.non_matches);
      want_text = match ? "true" : "false";
      agree = got.ok() && *got == match;
    }
    // A runtime-cost difference is a disagreement too (CELDIFF_LENIENT_COST=1: reported only).
    static const bool strict_cost = std::getenv("CELDIFF_LENIENT_COST") == nullptr;
    bool cost_agrees = !want.contains("cost") || want.at("cost").get<uint64_t>() == cost;
    if (line.value("orderDependent", false)) {
      ++t.order_dependent_costs;
      cost_agrees = true;
    }
    if (want.contains("error") &&
        want.at("error").get<std::string>().find("internal error: interface conversion") !=
            std::string::npos) {
      ++t.tracker_panics;  // mirrored by the engine, costs included
    }
    if (agree && strict_cost && !cost_agrees) {
      agree = false;
      want_text += " (cost " + std::to_string(want.at("cost").get<uint64_t>()) +
                   (want.contains("costMax")
                        ? " in [" + std::to_string(want.at("costMin").get<uint64_t>()) + ", " +
                              std::to_string(want.at("costMax").get<uint64_t>()) + "]"
                        : std::string()) +
                   ", devlet " + std::to_string(cost) + ")";
    }
    if (agree && !cost_agrees) {
      if (++t.cost_differences <= 5) {
        std::printf("cost differs: %s on %s: kubernetes %llu, devlet %llu\n", expr.c_str(),
                    device.name.c_str(),
                    static_cast<unsigned long long>(want.at("cost").get<uint64_t>()),
                    static_cast<unsigned long long>(cost));
      }
    }
    if (verbose_) {
      std::printf(
          "%s on %s: kubernetes %s cost %llu (estimate %llu); devlet %s cost %llu (estimate "
          "%llu)\n",
          expr.c_str(), device.name.c_str(), want_text.c_str(),
          static_cast<unsigned long long>(want.value("cost", uint64_t{0})),
          static_cast<unsigned long long>(line.value("maxCost", uint64_t{0})),
          got.ok() ? (*got ? "true" : "false") : Message(got.status()).c_str(),
          static_cast<unsigned long long>(cost),
          static_cast<unsigned long long>(program.estimated_cost().max));
    }
    if (!agree) {
      Disagree(t, expr, is_known,
               Source(line) + ": `" + expr + "` on " + device.name + ": kubernetes " + want_text +
                   "; devlet " +
                   (got.ok() ? (*got ? "true" : "false") : "error: " + Message(got.status())));
    }
  }

  Known* known_;
  bool verbose_;
  FILE* dump_ = nullptr;
  int reported_ = 0;
  std::map<std::string, Tally> tallies_;
};

void RunDifferential(int random, int seed, bool with_corpus, Known* known,
                     const std::string& corpus = CELDIFF_CORPUS, bool verbose = false,
                     int mutations = 0) {
  absl::StatusOr<std::vector<json>> lines = RunOracle(random, seed, with_corpus, corpus, mutations);
  ASSERT_TRUE(lines.ok()) << lines.status();
  ASSERT_FALSE(lines->empty());
  absl::StatusOr<std::vector<Device>> devices = BuildDevices(lines->front().at("devices"));
  ASSERT_TRUE(devices.ok()) << devices.status();
  Differential differential(known, verbose);
  for (size_t i = 1; i < lines->size(); ++i) {
    const json& line = (*lines)[i];
    const std::string source = line.at("source").get<std::string>();
    std::string kind = source.substr(0, source.find(':'));
    if (kind == "corpus" && corpus == CELDIFF_SYNTAX) {
      kind = "syntax";
    }
    differential.Expression(line, kind, *devices);
  }
  differential.Print();
}

TEST(CelDiffTest, CorpusAndSeededRandomSelectorsAgreeWithKubernetes) {
  absl::StatusOr<Known> known = LoadKnown(CELDIFF_KNOWN);
  ASSERT_TRUE(known.ok()) << known.status();
  // CELDIFF_PROBE=FILE evaluates only FILE (corpus format) and prints every outcome and cost on
  // both sides: a debugging aid for single expressions.
  if (const char* probe = std::getenv("CELDIFF_PROBE"); probe != nullptr) {
    Known none;
    RunDifferential(/*random=*/0, /*seed=*/1, /*with_corpus=*/true, &none, probe, /*verbose=*/true);
    return;
  }
  // CELDIFF_ONLY_SYNTAX=1 runs only the syntax-error run below (listed known disagreements of the
  // other runs are then not checked).
  const bool only_syntax = std::getenv("CELDIFF_ONLY_SYNTAX") != nullptr;
  // CELDIFF_ONLY_MORE=1 runs only the CELDIFF_MORE_SEEDS seeds (a quick wider search; the listed
  // known disagreements are not checked then).
  const bool only_more = std::getenv("CELDIFF_ONLY_MORE") != nullptr;
  if (!only_syntax && !only_more) {
    // The corpus, then random selectors from three seeds.
    RunDifferential(/*random=*/2000, /*seed=*/1, /*with_corpus=*/true, &*known);
    RunDifferential(/*random=*/1000, /*seed=*/2, /*with_corpus=*/false, &*known);
    RunDifferential(/*random=*/1000, /*seed=*/3, /*with_corpus=*/false, &*known);
  }
  // Syntax errors: syntax.txt's hand-written mistakes and seeded mutations (a token deleted,
  // inserted, doubled or swapped) of mutation_seeds.txt's selectors; error texts compared exactly.
  // CELDIFF_SYNTAX_MUTATIONS=N and CELDIFF_SYNTAX_SEED=S widen the search.
  if (!only_more) {
    const char* n = std::getenv("CELDIFF_SYNTAX_MUTATIONS");
    const char* s = std::getenv("CELDIFF_SYNTAX_SEED");
    RunDifferential(/*random=*/0, /*seed=*/s != nullptr ? std::atoi(s) : 1, /*with_corpus=*/true,
                    &*known, CELDIFF_SYNTAX, /*verbose=*/false,
                    /*mutations=*/n != nullptr ? std::atoi(n) : 1000);
  }
  // CELDIFF_MORE_SEEDS=4,5,... adds 1000 random selectors per seed (a wider search; listed
  // known disagreements must still occur in the default run).
  if (const char* more = std::getenv("CELDIFF_MORE_SEEDS"); more != nullptr) {
    for (const char* p = more; *p != '\0';) {
      char* end = nullptr;
      const long seed = std::strtol(p, &end, 10);
      if (end == p) break;
      RunDifferential(/*random=*/1000, static_cast<int>(seed), /*with_corpus=*/false, &*known);
      p = *end == ',' ? end + 1 : end;
    }
  }
  for (const auto& [expr, reason] : known->reason_by_expr) {
    auto it = known->disagreed.find(expr);
    if (it == known->disagreed.end()) {
      if (only_syntax || only_more) continue;
      ADD_FAILURE() << "known_disagreements.txt lists an expression that no longer occurs: " << expr;
    } else if (!it->second && !only_more) {
      ADD_FAILURE() << "known_disagreements.txt lists an expression that now agrees with "
                    << "Kubernetes (remove it): " << expr;
    }
  }
}

}  // namespace
}  // namespace devlet::cel
