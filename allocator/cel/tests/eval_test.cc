// The public evaluation API: activations, result inspection, cost limits, deadlines, threads.
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "devlet/cel/cel.h"
#include "devlet/common/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace devlet::cel {
namespace {

using ::testing::HasSubstr;

Program MustCompile(std::string_view expr, EnvironmentOptions options = {}) {
  absl::StatusOr<Program> p = Environment(std::move(options)).Compile(expr);
  EXPECT_TRUE(p.ok()) << expr << ": " << p.status();
  if (!p.ok()) return *Environment().Compile("null");
  return *std::move(p);
}

TEST(EvalTest, BindingsAndDeclaredTypes) {
  EnvironmentOptions options;
  options.variables.emplace_back("x", Type::Int());
  options.variables.emplace_back("names", Type::List(Type::String()));
  Program p = MustCompile("names.filter(n, n.startsWith('a')).size() + x", options);
  EXPECT_EQ(p.result_type(), Type::Int());
  Activation a;
  a.Bind("x", Value::Int(10));
  a.Bind("names", Value::List({Value::String("ab"), Value::String("b"), Value::String("ac")}));
  EvalResult r = p.Evaluate(a);
  ASSERT_EQ(r.value.kind(), Value::Kind::kInt) << r.value.DebugString();
  EXPECT_EQ(r.value.int_value(), 12);
  EXPECT_GT(r.cost, 0u);
}

TEST(EvalTest, UnboundVariableIsAnErrorValue) {
  EnvironmentOptions options;
  options.variables.emplace_back("x", Type::Int());
  EvalResult r = MustCompile("x + 1", options).Evaluate(Activation());
  ASSERT_TRUE(r.value.is_error());
  EXPECT_THAT(r.value.error_message(), HasSubstr("no such attribute: x"));
}

TEST(EvalTest, InspectCompositeResults) {
  EvalResult r = MustCompile(R"({"a": [1, 2u, 3.5], "b": {"c": b"\x00"}, "d": optional.of(null)})")
                     .Evaluate(Activation());
  ASSERT_EQ(r.value.kind(), Value::Kind::kMap);
  const Value* a = r.value.Find(Value::String("a"));
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->list().size(), 3u);
  EXPECT_EQ(a->list()[1].uint_value(), 2u);
  EXPECT_EQ(a->list()[2].double_value(), 3.5);
  const Value* d = r.value.Find(Value::String("d"));
  ASSERT_NE(d, nullptr);
  ASSERT_NE(d->optional_value(), nullptr);
  EXPECT_EQ(d->optional_value()->kind(), Value::Kind::kNull);
  EXPECT_EQ(r.value.DebugString(),
            R"({"a": [1, 2u, 3.5], "b": {"c": b"\x00"}, "d": optional.of(null)})");
  EXPECT_TRUE(Value::Equivalent(
      r.value, Value::Map({{Value::String("d"), Value::OptionalOf(Value::Null())},
                           {Value::String("b"), Value::Map({{Value::String("c"), Value::Bytes(std::string(1, '\0'))}})},
                           {Value::String("a"), Value::List({Value::Int(1), Value::Int(2), Value::Double(3.5)})}})));
}

TEST(EvalTest, ChecksCanBeDisabled) {
  EnvironmentOptions options;
  options.type_check = false;
  Program p = MustCompile("y || true", options);
  EXPECT_TRUE(p.Evaluate(Activation()).value.bool_value());
  Activation a;
  a.Bind("y", Value::Bool(false));
  EXPECT_TRUE(p.Evaluate(a).value.bool_value());
}

TEST(EvalTest, CostLimitAbortsWithClearError) {
  Program p = MustCompile("lists.range(1000).all(x, lists.range(1000).all(y, x + y >= 0))");
  EvalOptions options;
  options.cost_limit = 100000;
  EvalResult r = p.Evaluate(Activation(), options);
  ASSERT_TRUE(r.value.is_error());
  EXPECT_EQ(r.value.error_message(), "operation cancelled: actual cost limit exceeded");
  EXPECT_EQ(r.abort, EvalResult::Abort::kCostLimit);
  EXPECT_LT(r.cost, 200000u);
}

TEST(EvalTest, DeadlineInterruptsLongComprehensions) {
  Program p = MustCompile(
      "lists.range(1000).all(a, lists.range(1000).all(b, lists.range(1000).all(c, a + b + c >= 0)))");
  EvalOptions options;
  options.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(20);
  const auto start = std::chrono::steady_clock::now();
  EvalResult r = p.Evaluate(Activation(), options);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  ASSERT_TRUE(r.value.is_error());
  EXPECT_EQ(r.abort, EvalResult::Abort::kDeadline);
  EXPECT_THAT(r.value.error_message(), HasSubstr("deadline exceeded"));
}

TEST(EvalTest, CancellationFlag) {
  Program p = MustCompile("lists.range(100000).all(a, a >= 0)");
  std::atomic<bool> cancelled{true};
  EvalOptions options;
  options.cancelled = &cancelled;
  EvalResult r = p.Evaluate(Activation(), options);
  EXPECT_EQ(r.abort, EvalResult::Abort::kCancelled);
}

TEST(EvalTest, CelGoPanicsFailTheWholeEvaluation) {
  // distinct() of a non-list panics in cel-go's cost tracker; `|| true` does not absorb it.
  Program p = MustCompile("dyn(1).distinct() == [] || true");
  EvalResult r = p.Evaluate(Activation());
  ASSERT_TRUE(r.value.is_error());
  EXPECT_EQ(r.abort, EvalResult::Abort::kInternal);
  EXPECT_EQ(r.value.error_message(),
            "internal error: interface conversion: types.Int is not traits.Lister: missing method "
            "Contains");
  // The same expression over a list is fine.
  p = MustCompile("dyn([1, 1]).distinct() == [1] || true");
  r = p.Evaluate(Activation());
  EXPECT_EQ(r.abort, EvalResult::Abort::kNone);
  EXPECT_TRUE(r.value.bool_value());
}

TEST(EvalTest, ProgramIsSafeToShareAcrossThreads) {
  EnvironmentOptions options;
  options.variables.emplace_back("x", Type::Int());
  Program p = MustCompile("[x, x + 1, x + 2].map(v, string(v)).join(',') == string(x) + ',' + string(x + 1) + ',' + string(x + 2)",
                          options);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        Activation a;
        a.Bind("x", Value::Int(t * 10000 + i));
        EvalResult r = p.Evaluate(a);
        if (!r.value.bool_value()) failures++;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(EvalTest, EstimatedCostBoundsRuntimeCost) {
  EnvironmentOptions options;
  options.variables.emplace_back("s", Type::String());
  Program p = MustCompile("s == 'abc' && 'abc'.size() == 3", options);
  Activation a;
  a.Bind("s", Value::String("abc"));
  EvalResult r = p.Evaluate(a);
  EXPECT_TRUE(r.value.bool_value());
  EXPECT_GE(p.estimated_cost().max, 1u);
}

TEST(EvalTest, TypeDebugStrings) {
  EXPECT_EQ(Type::Map(Type::String(), Type::List(Type::Int())).DebugString(), "map(string, list(int))");
  EXPECT_EQ(Type::Optional(Type::Dyn()).DebugString(), "optional_type(dyn)");
  EXPECT_EQ(MustCompile("[1, 2]").result_type(), Type::List(Type::Int()));
  EXPECT_EQ(MustCompile("1 == 1").result_type(), Type::Bool());
}

}  // namespace
}  // namespace devlet::cel
