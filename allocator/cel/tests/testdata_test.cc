// Data-driven CEL cases: every tests/testdata/*.txt file, one gtest per file, each case reported
// with its file and line. Format (see tests/testdata/README.md):
//
//   # comment
//   expr: device.attributes["dra.example.com"].model == "a100"
//   driver: dra.example.com
//   attr: model = string:a100
//   capacity: memory = 1Gi
//   result: true                 (a CEL expression for the expected value)
//   error: no such key           (substring of the runtime error)
//   compile-error: Syntax error  (substring of the compile error)
//   cost: 5                      (exact runtime cost)
//   estimate: 6                  (exact estimated maximum cost)
//
// Cases are separated by blank lines. `mode: cel` switches from the DRA selector environment to a
// plain environment with `var: name = <cel expression>` bindings and `options:` flags.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "devlet/cel/cel.h"
#include "devlet/cel/dra.h"
#include "devlet/common/status.h"
#include "gtest/gtest.h"

namespace devlet::cel {
namespace {

struct Case {
  std::string file;
  int line = 0;
  std::vector<std::pair<std::string, std::string>> fields;  // key, value (in order)

  std::string Get(std::string_view key) const {
    for (const auto& [k, v] : fields) {
      if (k == key) return v;
    }
    return "";
  }
  bool Has(std::string_view key) const {
    return std::any_of(fields.begin(), fields.end(), [&](const auto& f) { return f.first == key; });
  }
  std::string Where() const { return file + ":" + std::to_string(line); }
};

std::string Trim(std::string s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

std::vector<Case> ReadCases(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::vector<Case> cases;
  Case current;
  std::string line;
  int n = 0;
  auto flush = [&] {
    if (!current.fields.empty()) cases.push_back(current);
    current = Case{};
  };
  while (std::getline(in, line)) {
    ++n;
    if (Trim(line).empty()) {
      flush();
      continue;
    }
    if (line[0] == '#') continue;
    if ((line[0] == ' ' || line[0] == '\t') && !current.fields.empty()) {
      current.fields.back().second += "\n" + Trim(line);  // continuation
      continue;
    }
    const auto colon = line.find(':');
    if (colon == std::string::npos) {
      ADD_FAILURE() << path << ":" << n << ": expected 'key: value'";
      continue;
    }
    if (current.fields.empty()) {
      current.file = path.filename().string();
      current.line = n;
    }
    current.fields.emplace_back(Trim(line.substr(0, colon)), Trim(line.substr(colon + 1)));
  }
  flush();
  return cases;
}

// Evaluates a constant CEL expression (expected values, variable values).
absl::StatusOr<Value> Literal(const std::string& text) {
  EnvironmentOptions options;
  Environment env(options);
  absl::StatusOr<Program> p = env.Compile(text);
  if (!p.ok()) return p.status();
  EvalResult r = p->Evaluate(Activation());
  if (r.value.is_error()) return devlet::InvalidArgument(r.value.error_message());
  return r.value;
}

std::pair<std::string, std::string> SplitAssign(const std::string& s) {
  const auto eq = s.find('=');
  if (eq == std::string::npos) return {Trim(s), ""};
  return {Trim(s.substr(0, eq)), Trim(s.substr(eq + 1))};
}

std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(Trim(item));
  return out;
}

bool SetAttribute(dra::SimpleDevice& device, const std::string& spec, std::string* error) {
  auto [name, typed] = SplitAssign(spec);
  const auto colon = typed.find(':');
  if (colon == std::string::npos) {
    *error = "attr wants name = type:value";
    return false;
  }
  const std::string type = typed.substr(0, colon);
  const std::string value = typed.substr(colon + 1);
  if (type == "int") {
    device.SetInt(name, std::stoll(value));
  } else if (type == "bool") {
    device.SetBool(name, value == "true");
  } else if (type == "string") {
    device.SetString(name, value);
  } else if (type == "version") {
    device.SetVersion(name, value);
  } else if (type == "ints") {
    std::vector<int64_t> v;
    for (const std::string& s : SplitList(value)) v.push_back(std::stoll(s));
    device.SetInts(name, v);
  } else if (type == "bools") {
    std::vector<bool> v;
    for (const std::string& s : SplitList(value)) v.push_back(s == "true");
    device.SetBools(name, v);
  } else if (type == "strings") {
    device.SetStrings(name, value.empty() ? std::vector<std::string>{} : SplitList(value));
  } else if (type == "versions") {
    device.SetVersions(name, SplitList(value));
  } else if (type == "nstrings") {  // nstrings:49 -> value-1 ... value-49
    std::vector<std::string> v;
    for (int i = 1; i <= std::stoi(value); ++i) v.push_back("value-" + std::to_string(i));
    device.SetStrings(name, v);
  } else {
    *error = "unknown attribute type " + type;
    return false;
  }
  return true;
}

void RunCase(const Case& c) {
  SCOPED_TRACE(c.Where() + ": " + c.Get("expr"));
  const bool dra_mode = c.Get("mode") != "cel";
  const std::vector<std::string> flags = SplitList(c.Get("options"));
  auto flag = [&](std::string_view f) { return std::find(flags.begin(), flags.end(), f) != flags.end(); };

  absl::StatusOr<Program> program;
  Activation activation;
  std::unique_ptr<dra::SimpleDevice> device;
  if (dra_mode) {
    dra::SelectorOptions so;
    so.consumable_capacity = !flag("no-consumable-capacity");
    so.list_type_attributes = !flag("no-list-attributes");
    program = dra::CompileSelector(c.Get("expr"), so);
    device = std::make_unique<dra::SimpleDevice>(c.Has("driver") ? c.Get("driver") : "dra.example.com");
    for (const auto& [k, v] : c.fields) {
      std::string error;
      if (k == "attr") {
        ASSERT_TRUE(SetAttribute(*device, v, &error)) << error;
      } else if (k == "capacity") {
        auto [name, qty] = SplitAssign(v);
        ASSERT_TRUE(device->SetCapacity(name, qty).ok()) << v;
      } else if (k == "allowMultipleAllocations") {
        device->set_allow_multiple_allocations(v == "true");
      }
    }
    activation.BindDevice(device.get());
  } else {
    EnvironmentOptions options;
    options.enable_macros = !flag("no-macros");
    options.type_check = !flag("no-check");
    options.homogeneous_aggregate_literals = flag("homogeneous");
    options.validate_regex_literals = !flag("no-regex-validation");
    for (const auto& [k, v] : c.fields) {
      if (k == "var") {
        auto [name, text] = SplitAssign(v);
        absl::StatusOr<Value> value = Literal(text);
        ASSERT_TRUE(value.ok()) << "var " << name << ": " << value.status();
        activation.Bind(name, *value);
        options.variables.emplace_back(name, Type::Dyn());
      } else if (k == "decl") {
        options.variables.emplace_back(v, Type::Dyn());
      }
    }
    program = Environment(options).Compile(c.Get("expr"));
  }

  if (c.Has("compile-error")) {
    ASSERT_FALSE(program.ok()) << "expected a compile error";
    EXPECT_NE(devlet::Message(program.status()).find(c.Get("compile-error")), std::string::npos)
        << devlet::Message(program.status());
    return;
  }
  ASSERT_TRUE(program.ok()) << program.status();
  if (c.Has("estimate")) {
    EXPECT_EQ(program->estimated_cost().max, std::stoull(c.Get("estimate"))) << "estimated cost";
  }
  EvalOptions eval_options;
  eval_options.cost_limit = dra_mode ? dra::kSelectorMaxCost : 0;
  if (c.Has("cost-limit")) eval_options.cost_limit = std::stoull(c.Get("cost-limit"));
  EvalResult r = program->Evaluate(activation, eval_options);
  if (c.Has("error")) {
    ASSERT_TRUE(r.value.is_error()) << "expected an error, got " << r.value.DebugString();
    EXPECT_NE(r.value.error_message().find(c.Get("error")), std::string::npos) << r.value.error_message();
  } else {
    const std::string expected_text = c.Has("result") ? c.Get("result") : "true";
    absl::StatusOr<Value> expected = Literal(expected_text);
    ASSERT_TRUE(expected.ok()) << "result: " << expected.status();
    EXPECT_TRUE(Value::Equivalent(r.value, *expected))
        << "got " << r.value.DebugString() << ", want " << expected->DebugString();
    if (dra_mode) {
      absl::StatusOr<bool> m = dra::Match(*program, *device);
      if (r.value.kind() == Value::Kind::kBool) {
        EXPECT_TRUE(m.ok() && *m == r.value.bool_value()) << "Match disagrees: " << m.status();
      } else {
        EXPECT_FALSE(m.ok());
      }
    }
  }
  if (c.Has("cost")) {
    EXPECT_EQ(r.cost, std::stoull(c.Get("cost"))) << "runtime cost";
  }
  // Kubernetes' estimate is not always an upper bound (a select or index on a call result costs a
  // relative attribute at runtime that the estimator does not see); `estimate-below-cost: true`
  // marks such cases.
  if (dra_mode && !r.value.is_error() && !c.Has("estimate-below-cost")) {
    EXPECT_LE(r.cost, program->estimated_cost().max) << "actual cost above the estimate";
  }
}

class TestdataTest : public ::testing::TestWithParam<std::string> {};

TEST_P(TestdataTest, Cases) {
  const std::filesystem::path path = std::filesystem::path("tests/testdata") / GetParam();
  const std::vector<Case> cases = ReadCases(path);
  ASSERT_FALSE(cases.empty()) << path;
  for (const Case& c : cases) RunCase(c);
}

std::vector<std::string> TestFiles() {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("tests/testdata", ec)) {
    if (entry.path().extension() == ".txt") files.push_back(entry.path().filename().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

INSTANTIATE_TEST_SUITE_P(Files, TestdataTest, ::testing::ValuesIn(TestFiles()),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           std::string name = param.param.substr(0, param.param.size() - 4);
                           for (char& ch : name) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace devlet::cel
