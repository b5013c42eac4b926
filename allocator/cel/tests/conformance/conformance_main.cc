// cel_conformance: runs google/cel-spec's simple conformance files (tests/simple/testdata/
// *.textproto, read from the Go module cache: module cel.dev/expr) against devlet's CEL engine.
//
//   cel_conformance --testdata DIR [--files basic,logic] [--known known_failures.txt] [-v]
//
// Per test, as the cel-spec runner does: compile (macros off with disable_macros; no type check
// with disable_check; declarations from type_env; HomogeneousAggregateLiterals OFF, as the spec
// data expects) -- a compile error fails the test -- then, unless check_only, evaluate with the
// bindings and compare with the matcher: `value` (default: true), `typed_result` (value and
// deduced type), `eval_error` / `any_eval_errors` (the result must be an error; message texts
// differ between implementations and are not compared).
//
// Tests are skipped only by the rules in SkipReason() below (features outside the engine's scope,
// such as protobuf messages), each with its reason. Failures listed in the known-failures file
// ("file/section/test", then two spaces or a tab, then the reason) are reported but tolerated; a listed test that passes is an error
// (the list must stay honest). Exit status 1 on any unexpected failure.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "devlet/cel/cel.h"
#include "devlet/cel/type.h"
#include "devlet/cel/value.h"
#include "devlet/common/status.h"
#include "textproto.h"

namespace devlet::cel::conformance {
namespace {

// The files research §4.1 lists as the minimum for a DRA evaluator, plus the extension files of
// libraries Kubernetes enables (ext.Lists v3, ext.Sets), timestamps/durations (standard library)
// and the plumbing/namespace basics.
constexpr const char* kDefaultFiles[] = {
    "basic",        "logic",       "comparisons", "macros",    "macros2",  "string",
    "string_ext",   "integer_math", "fp_math",    "lists",     "fields",   "conversions",
    "parse",        "optionals",   "bindings_ext", "lists_ext", "sets_ext", "plumbing",
    "namespace",    "timestamps",
};

// ---- Converting conformance protos (cel.expr.Value, cel.expr.Type) -------------------------------

using Msg = TextprotoMessage;
using Field = TextprotoField;

// Set when a conversion meets something the engine cannot represent (a protobuf message, ...).
struct Unsupported {
  std::string reason;
};

std::optional<Value> ToValue(const Msg& m, Unsupported* unsupported);

std::optional<int64_t> ParseInt(const std::string& text) {
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 0);
  if (errno != 0 || end == text.c_str() || *end != '\0') return std::nullopt;
  return static_cast<int64_t>(v);
}
std::optional<uint64_t> ParseUint(const std::string& text) {
  errno = 0;
  char* end = nullptr;
  unsigned long long v = std::strtoull(text.c_str(), &end, 0);
  if (errno != 0 || end == text.c_str() || *end != '\0' || text[0] == '-') return std::nullopt;
  return static_cast<uint64_t>(v);
}
double ParseDouble(const std::string& text) {
  std::string t = text;
  for (char& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (t == "inf" || t == "infinity") return INFINITY;
  if (t == "-inf" || t == "-infinity") return -INFINITY;
  if (t == "nan") return NAN;
  if (!t.empty() && (t.back() == 'f')) t.pop_back();
  return std::strtod(t.c_str(), nullptr);
}

std::optional<Value> ToValueField(const Field& f, Unsupported* unsupported) {
  const std::string& name = f.name;
  if (name == "null_value") return Value::Null();
  if (name == "bool_value") return Value::Bool(f.text == "true" || f.text == "1");
  if (name == "int64_value") {
    auto v = ParseInt(f.text);
    if (!v) return std::nullopt;
    return Value::Int(*v);
  }
  if (name == "uint64_value") {
    auto v = ParseUint(f.text);
    if (!v) return std::nullopt;
    return Value::Uint(*v);
  }
  if (name == "double_value") return Value::Double(ParseDouble(f.text));
  if (name == "string_value") return Value::String(f.text);
  if (name == "bytes_value") return Value::Bytes(f.text);
  if (name == "type_value") return Value::Type(f.text);
  if (name == "list_value") {
    std::vector<Value> elements;
    if (f.message) {
      for (const Field* e : f.message->FindAll("values")) {
        if (!e->message) return std::nullopt;
        auto v = ToValue(*e->message, unsupported);
        if (!v) return std::nullopt;
        elements.push_back(std::move(*v));
      }
    }
    return Value::List(std::move(elements));
  }
  if (name == "map_value") {
    std::vector<Value::Entry> entries;
    if (f.message) {
      for (const Field* e : f.message->FindAll("entries")) {
        if (!e->message) return std::nullopt;
        const Field* k = e->message->Find("key");
        const Field* v = e->message->Find("value");
        if (k == nullptr || v == nullptr || !k->message || !v->message) return std::nullopt;
        auto kv = ToValue(*k->message, unsupported);
        auto vv = ToValue(*v->message, unsupported);
        if (!kv || !vv) return std::nullopt;
        entries.emplace_back(std::move(*kv), std::move(*vv));
      }
    }
    return Value::Map(std::move(entries));
  }
  if (name == "object_value") {
    unsupported->reason = "needs protobuf message values (object_value)";
    return std::nullopt;
  }
  if (name == "enum_value") {
    unsupported->reason = "needs protobuf enum values";
    return std::nullopt;
  }
  return std::nullopt;
}

// A cel.expr.Value message: exactly one kind field.
std::optional<Value> ToValue(const Msg& m, Unsupported* unsupported) {
  if (m.fields.empty()) return std::nullopt;
  return ToValueField(m.fields.front(), unsupported);
}

// A cel.expr.Type message.
std::optional<Type> ToType(const Msg& m, Unsupported* unsupported) {
  if (m.fields.empty()) return std::nullopt;
  const Field& f = m.fields.front();
  if (f.name == "dyn") return Type::Dyn();
  if (f.name == "null") return Type::Null();
  if (f.name == "primitive") {
    static const std::map<std::string, Type> kPrimitives = {
        {"BOOL", Type::Bool()},     {"INT64", Type::Int()},     {"UINT64", Type::Uint()},
        {"DOUBLE", Type::Double()}, {"STRING", Type::String()}, {"BYTES", Type::Bytes()},
    };
    auto it = kPrimitives.find(f.text);
    if (it == kPrimitives.end()) return std::nullopt;
    return it->second;
  }
  if (f.name == "list_type" && f.message) {
    const Field* e = f.message->Find("elem_type");
    if (e == nullptr || !e->message) return std::nullopt;
    auto elem = ToType(*e->message, unsupported);
    if (!elem) return std::nullopt;
    return Type::List(*elem);
  }
  if (f.name == "map_type" && f.message) {
    const Field* k = f.message->Find("key_type");
    const Field* v = f.message->Find("value_type");
    if (k == nullptr || v == nullptr || !k->message || !v->message) return std::nullopt;
    auto kt = ToType(*k->message, unsupported);
    auto vt = ToType(*v->message, unsupported);
    if (!kt || !vt) return std::nullopt;
    return Type::Map(*kt, *vt);
  }
  if (f.name == "type" && f.message) {
    return Type::TypeType();
  }
  if (f.name == "abstract_type" && f.message && f.message->Text("name") == "optional_type") {
    const Field* p = f.message->Find("parameter_types");
    if (p == nullptr || !p->message) return std::nullopt;
    auto pt = ToType(*p->message, unsupported);
    if (!pt) return std::nullopt;
    return Type::Optional(*pt);
  }
  if (f.name == "message_type" || f.name == "well_known" || f.name == "wrapper") {
    unsupported->reason = "needs protobuf message types (" + f.name + ")";
    return std::nullopt;
  }
  unsupported->reason = "unsupported declared type " + f.name;
  return std::nullopt;
}

// Strict structural equality for expectations: same kinds (no int/uint/double mixing), NaN
// matches NaN, maps ignore order.
bool SameValue(const Value& a, const Value& b) {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kNull: return true;
    case Value::Kind::kBool: return a.bool_value() == b.bool_value();
    case Value::Kind::kInt: return a.int_value() == b.int_value();
    case Value::Kind::kUint: return a.uint_value() == b.uint_value();
    case Value::Kind::kDouble:
      return a.double_value() == b.double_value() ||
             (std::isnan(a.double_value()) && std::isnan(b.double_value()));
    case Value::Kind::kString:
    case Value::Kind::kBytes:
    case Value::Kind::kType:
    case Value::Kind::kError: return a.string_value() == b.string_value();
    case Value::Kind::kList: {
      if (a.list().size() != b.list().size()) return false;
      for (size_t i = 0; i < a.list().size(); ++i) {
        if (!SameValue(a.list()[i], b.list()[i])) return false;
      }
      return true;
    }
    case Value::Kind::kMap: {
      if (a.map().size() != b.map().size()) return false;
      for (const Value::Entry& e : a.map()) {
        bool found = false;
        for (const Value::Entry& f : b.map()) {
          if (SameValue(e.first, f.first)) {
            if (!SameValue(e.second, f.second)) return false;
            found = true;
            break;
          }
        }
        if (!found) return false;
      }
      return true;
    }
    case Value::Kind::kOptional: {
      const Value* x = a.optional_value();
      const Value* y = b.optional_value();
      if (x == nullptr || y == nullptr) return x == y;
      return SameValue(*x, *y);
    }
    default: return Value::Equivalent(a, b);
  }
}

// ---- Skip rules (reviewed): features outside the engine's scope. ---------------------------------

// Whole sections outside the Kubernetes CEL environment.
struct SectionSkip {
  const char* file;
  const char* section;
  const char* reason;
};
constexpr SectionSkip kSectionSkips[] = {
    {"string_ext", "reverse", "string reverse() is ext.Strings v3; Kubernetes enables v2"},
};

// Returns a non-empty reason when the test needs something the engine deliberately lacks.
std::string SkipReason(const std::string& file, const std::string& section, const Msg& test) {
  for (const SectionSkip& s : kSectionSkips) {
    if (file == s.file && section == s.section) return s.reason;
  }
  const std::string expr = test.Text("expr");
  const std::string container = test.Text("container");
  if (container.find("cel.expr.conformance") != std::string::npos ||
      expr.find("TestAllTypes") != std::string::npos ||
      expr.find("NestedTestAllTypes") != std::string::npos ||
      expr.find("conformance.proto") != std::string::npos) {
    return "needs protobuf message types (TestAllTypes)";
  }
  if (expr.find("google.protobuf.") != std::string::npos) {
    return "needs protobuf well-known types (wrappers, Any, Struct)";
  }
  if (!container.empty()) return "containers (namespace resolution) are not supported";
  if (test.Find("unknown") != nullptr || test.Find("any_unknowns") != nullptr) {
    return "unknown-value tracking (partial evaluation) is not supported";
  }
  return "";
}

// ---- The runner ------------------------------------------------------------------------------

struct Counts {
  int pass = 0;
  int fail = 0;
  int known = 0;
  int skip = 0;
};

struct Runner {
  std::string testdata;
  std::map<std::string, std::string> known;  // "file/section/test" -> reason
  std::set<std::string> known_seen;
  bool verbose = false;
  int unexpected = 0;
  std::map<std::string, int> skip_reasons;

  // Returns "" on pass, else the failure description; `skip` set for skips.
  std::string RunTest(const std::string& file, const std::string& section, const Msg& test,
                      std::string* skip) {
    *skip = SkipReason(file, section, test);
    if (!skip->empty()) return "";
    Unsupported unsupported;

    EnvironmentOptions options;
    options.enable_macros = !test.Flag("disable_macros");
    options.type_check = !test.Flag("disable_check");
    options.homogeneous_aggregate_literals = false;
    for (const Field* decl : test.FindAll("type_env")) {
      if (!decl->message) continue;
      const Field* ident = decl->message->Find("ident");
      if (ident == nullptr) {
        if (decl->message->Find("function") != nullptr) {
          *skip = "declares custom functions (needs host-provided implementations)";
          return "";
        }
        continue;
      }
      const Field* type = ident->message ? ident->message->Find("type") : nullptr;
      if (type == nullptr || !type->message) return "bad type_env";
      auto t = ToType(*type->message, &unsupported);
      if (!t) {
        *skip = unsupported.reason.empty() ? "unsupported declaration" : unsupported.reason;
        return "";
      }
      options.variables.emplace_back(decl->message->Text("name"), *t);
    }
    Activation activation;
    for (const Field* binding : test.FindAll("bindings")) {
      if (!binding->message) continue;
      const Field* value = binding->message->Find("value");
      if (value == nullptr || !value->message) return "bad binding";
      const Field* inner = value->message->Find("value");
      if (inner == nullptr || !inner->message) {
        *skip = "binding is not a plain value (error or unknown)";
        return "";
      }
      auto v = ToValue(*inner->message, &unsupported);
      if (!v) {
        *skip = unsupported.reason.empty() ? "unsupported binding value" : unsupported.reason;
        return "";
      }
      activation.Bind(binding->message->Text("key"), std::move(*v));
    }

    // The expectation.
    enum class Expect { kValue, kError } expect = Expect::kValue;
    std::optional<Value> want = Value::Bool(true);
    std::optional<Type> want_type;
    if (const Field* f = test.Find("value"); f != nullptr) {
      want = f->message ? ToValue(*f->message, &unsupported) : std::nullopt;
      if (!want) {
        *skip = unsupported.reason.empty() ? "unsupported expected value" : unsupported.reason;
        return "";
      }
    } else if (const Field* tr = test.Find("typed_result"); tr != nullptr) {
      const Field* r = tr->message ? tr->message->Find("result") : nullptr;
      const Field* d = tr->message ? tr->message->Find("deduced_type") : nullptr;
      want = r && r->message ? ToValue(*r->message, &unsupported) : std::nullopt;
      if (d && d->message) want_type = ToType(*d->message, &unsupported);
      if ((r && !want) || (d && !want_type)) {
        *skip = unsupported.reason.empty() ? "unsupported typed result" : unsupported.reason;
        return "";
      }
    } else if (test.Find("eval_error") != nullptr || test.Find("any_eval_errors") != nullptr) {
      expect = Expect::kError;
    }

    Environment env(options);
    absl::StatusOr<Program> program = env.Compile(test.Text("expr"));
    if (!program.ok()) return "compile error: " + Message(program.status());
    if (want_type && !(program->result_type() == *want_type)) {
      return "deduced type " + program->result_type().DebugString() + ", want " +
             want_type->DebugString();
    }
    if (test.Flag("check_only")) return "";
    EvalResult result = program->Evaluate(activation);
    if (expect == Expect::kError) {
      if (result.value.is_error()) return "";
      return "got " + result.value.DebugString() + ", want an error";
    }
    if (result.value.is_error()) return "error: " + result.value.error_message();
    if (!SameValue(result.value, *want)) {
      return "got " + result.value.DebugString() + ", want " + want->DebugString();
    }
    return "";
  }

  absl::Status RunFile(const std::string& file, Counts* counts) {
    std::string path = testdata + "/" + file + ".textproto";
    std::ifstream in(path);
    if (!in) return NotFound("cannot read " + path);
    std::stringstream buffer;
    buffer << in.rdbuf();
    DEVLET_ASSIGN_OR_RETURN(Msg root, ParseTextproto(buffer.str()));
    for (const Field* section : root.FindAll("section")) {
      if (!section->message) continue;
      const std::string section_name = section->message->Text("name");
      for (const Field* test : section->message->FindAll("test")) {
        if (!test->message) continue;
        const std::string id = file + "/" + section_name + "/" + test->message->Text("name");
        std::string skip;
        std::string failure = RunTest(file, section_name, *test->message, &skip);
        auto known_it = known.find(id);
        if (!skip.empty()) {
          ++counts->skip;
          ++skip_reasons[file + ": " + skip];
          if (verbose) std::cout << "SKIP  " << id << ": " << skip << "\n";
        } else if (failure.empty()) {
          if (known_it != known.end()) {
            ++unexpected;
            known_seen.insert(id);
            std::cout << "XPASS " << id << ": listed as a known failure but passes; remove it from "
                      << "the list\n";
            ++counts->fail;
          } else {
            ++counts->pass;
            if (verbose) std::cout << "PASS  " << id << "\n";
          }
        } else if (known_it != known.end()) {
          known_seen.insert(id);
          ++counts->known;
          if (verbose) std::cout << "KNOWN " << id << ": " << failure << "\n";
        } else {
          ++unexpected;
          ++counts->fail;
          std::cout << "FAIL  " << id << ": `" << test->message->Text("expr") << "`: " << failure
                    << "\n";
        }
      }
    }
    return absl::OkStatus();
  }
};

absl::Status LoadKnown(const std::string& path, std::map<std::string, std::string>* known) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot read " + path);
  std::string line;
  while (std::getline(in, line)) {
    size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] == '#') continue;
    // The id ends at a tab or at two spaces (test names may contain single spaces).
    size_t end = std::min(line.find('\t', start), line.find("  ", start));
    std::string id = line.substr(start, end == std::string::npos ? end : end - start);
    size_t reason_start = end == std::string::npos ? end : line.find_first_not_of(" \t", end);
    std::string reason = reason_start == std::string::npos ? "" : line.substr(reason_start);
    if (reason.empty()) return InvalidArgument("known failure without a reason: " + id);
    (*known)[id] = reason;
  }
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  Runner runner;
  std::vector<std::string> files(std::begin(kDefaultFiles), std::end(kDefaultFiles));
  std::string known_path;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (arg == "--testdata") {
      runner.testdata = next();
    } else if (arg == "--files") {
      files.clear();
      std::stringstream list(next());
      for (std::string f; std::getline(list, f, ',');) {
        if (!f.empty()) files.push_back(f);
      }
    } else if (arg == "--known") {
      known_path = next();
    } else if (arg == "-v" || arg == "--verbose") {
      runner.verbose = true;
    } else {
      std::cerr << "usage: cel_conformance --testdata DIR [--files a,b] [--known FILE] [-v]\n";
      return 2;
    }
  }
  if (runner.testdata.empty()) {
    std::cerr << "cel_conformance: --testdata DIR is required (cel.dev/expr tests/simple/testdata)\n";
    return 2;
  }
  if (!known_path.empty()) {
    if (absl::Status s = LoadKnown(known_path, &runner.known); !s.ok()) {
      std::cerr << "cel_conformance: " << Message(s) << "\n";
      return 2;
    }
  }
  Counts total;
  std::vector<std::pair<std::string, Counts>> per_file;
  for (const std::string& file : files) {
    Counts counts;
    if (absl::Status s = runner.RunFile(file, &counts); !s.ok()) {
      std::cerr << "cel_conformance: " << file << ": " << Message(s) << "\n";
      return 1;
    }
    per_file.emplace_back(file, counts);
    total.pass += counts.pass;
    total.fail += counts.fail;
    total.known += counts.known;
    total.skip += counts.skip;
  }
  for (const auto& [id, reason] : runner.known) {
    bool in_run = std::any_of(files.begin(), files.end(), [&id](const std::string& f) {
      return id.rfind(f + "/", 0) == 0;
    });
    if (in_run && runner.known_seen.count(id) == 0) {
      std::cout << "STALE " << id << ": listed as a known failure but no such test ran\n";
      ++runner.unexpected;
    }
  }
  std::cout << "\nskip reasons:\n";
  for (const auto& [reason, n] : runner.skip_reasons) std::cout << "  " << n << "  " << reason << "\n";
  std::printf("\n%-14s %6s %6s %6s %6s\n", "file", "pass", "fail", "known", "skip");
  for (const auto& [file, c] : per_file) {
    std::printf("%-14s %6d %6d %6d %6d\n", file.c_str(), c.pass, c.fail, c.known, c.skip);
  }
  std::printf("%-14s %6d %6d %6d %6d\n", "total", total.pass, total.fail, total.known, total.skip);
  std::printf("conformance: %d passed, %d failed, %d skipped\n", total.pass, total.fail + total.known,
              total.skip);
  return runner.unexpected == 0 ? 0 : 1;
}

}  // namespace
}  // namespace devlet::cel::conformance

int main(int argc, char** argv) { return devlet::cel::conformance::Main(argc, argv); }
