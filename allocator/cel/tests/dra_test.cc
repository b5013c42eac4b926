// The DRA selector entry points: CompileSelector, Match, DeviceView semantics.
#include <chrono>

#include "devlet/cel/dra.h"
#include "devlet/common/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace devlet::cel::dra {
namespace {

using ::testing::HasSubstr;

Program Selector(std::string_view expr) {
  absl::StatusOr<Program> p = CompileSelector(expr);
  EXPECT_TRUE(p.ok()) << expr << ": " << p.status();
  return p.ok() ? *std::move(p) : *CompileSelector("false");
}

class DraTest : public ::testing::Test {
 protected:
  DraTest() : gpu_("gpu.example.com") {
    gpu_.SetString("model", "a100");
    gpu_.SetInt("memoryGB", 80);
    gpu_.SetBool("mig", true);
    gpu_.SetVersion("driverVersion", "535.104.5");
    gpu_.SetString("pci.example.com/bus", "0000:3b:00.0");
    EXPECT_TRUE(gpu_.SetCapacity("memory", "80Gi").ok());
  }
  SimpleDevice gpu_;
};

TEST_F(DraTest, TypicalSelectors) {
  EXPECT_EQ(*Match(Selector(R"(device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].model == "a100")"), gpu_), true);
  EXPECT_EQ(*Match(Selector(R"(device.attributes["gpu.example.com"].memoryGB >= 40)"), gpu_), true);
  EXPECT_EQ(*Match(Selector(R"(device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) > 0)"), gpu_), true);
  EXPECT_EQ(*Match(Selector(R"(device.attributes["gpu.example.com"].driverVersion.isLessThan(semver("600.0.0")))"), gpu_), true);
  EXPECT_EQ(*Match(Selector(R"(device.attributes["pci.example.com"].bus.startsWith("0000:3b"))"), gpu_), true);
  EXPECT_EQ(*Match(Selector(R"("pci.example.com" in device.attributes && !("x.example.com" in device.attributes))"), gpu_), true);
  EXPECT_EQ(*Match(Selector(R"(device.attributes["gpu.example.com"].?model.orValue("") == "a100")"), gpu_), true);
  EXPECT_EQ(*Match(Selector(R"(device.attributes["gpu.example.com"].?nope.orValue("x") == "x")"), gpu_), true);
  EXPECT_EQ(*Match(Selector(R"(has(device.attributes["gpu.example.com"].mig) && !has(device.attributes["gpu.example.com"].nope))"), gpu_), true);
  EXPECT_EQ(*Match(Selector(R"(device.attributes["gpu.example.com"].size() == 4)"), gpu_), true);
  EXPECT_EQ(*Match(Selector(R"(device.attributes["gpu.example.com"].exists(k, k == "mig"))"), gpu_), true);
  EXPECT_EQ(*Match(Selector(R"(device.attributes["nope.example.com"].size() == 0)"), gpu_), true);
  EXPECT_EQ(*Match(Selector(R"(cel.bind(d, device.attributes[device.driver], d.model == "a100" && d.mig))"), gpu_), true);
}

TEST_F(DraTest, RuntimeErrorsAreStatuses) {
  absl::StatusOr<bool> m = Match(Selector(R"(device.attributes["gpu.example.com"].nope == "x")"), gpu_);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(devlet::Message(m.status()), "no such key: nope");
  m = Match(Selector(R"(device.attributes["gpu.example.com"].model)"), gpu_);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(devlet::Message(m.status()),
            "CEL result of type string could not be converted to bool: unsupported native "
            "conversion from string to 'bool'");
}

TEST_F(DraTest, CostLimitAndDeadline) {
  Program p = Selector("lists.range(1000).all(a, lists.range(1000).all(b, a + b >= 0))");
  uint64_t cost = 0;
  absl::StatusOr<bool> m = Match(p, gpu_, {}, &cost);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(devlet::Message(m.status()), HasSubstr("actual cost limit exceeded"));
  EXPECT_GT(cost, kSelectorMaxCost);
  MatchOptions options;
  options.cost_limit = UINT64_MAX;
  options.deadline = std::chrono::steady_clock::now();
  m = Match(p, gpu_, options);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST_F(DraTest, DeviceValueMaterializes) {
  Activation a;
  a.BindDevice(&gpu_);
  absl::StatusOr<Program> p = Environment(EnvironmentOptions{.variables = {{"device", Type::DraDevice()}}})
                                  .Compile(R"(device.attributes["gpu.example.com"])");
  ASSERT_TRUE(p.ok()) << p.status();
  EvalResult r = p->Evaluate(a);
  ASSERT_EQ(r.value.kind(), Value::Kind::kMap) << r.value.DebugString();
  EXPECT_EQ(r.value.map().size(), 4u);
  EXPECT_EQ(r.value.Find(Value::String("model"))->string_value(), "a100");
}

TEST_F(DraTest, RepeatedMatchesAreStable) {
  Program p = Selector(R"(device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].model == "a100")");
  constexpr int kIterations = 20000;
  int matched = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kIterations; ++i) matched += *Match(p, gpu_) ? 1 : 0;
  const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() / kIterations;
  EXPECT_EQ(matched, kIterations);
  RecordProperty("ns_per_match", std::to_string(ns));
  std::printf("typical selector: %.0f ns per Match\n", ns);
  // No time bound here (sanitizer builds, shared machines): allocator/cel/bench measures speed.
}

}  // namespace
}  // namespace devlet::cel::dra
