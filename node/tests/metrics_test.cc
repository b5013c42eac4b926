#include "devlet/node/metrics.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace devlet::node {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(MetricsTest, RendersCountersGaugesAndCumulativeHistograms) {
  MetricsRegistry m;
  m.DeclareCounter("c_total", "A counter\nwith a \\ newline.");
  m.DeclareGauge("g", "A gauge.");
  m.DeclareHistogram("h_seconds", "A histogram.", {0.1, 1});
  m.Add("c_total", {{"result", "success"}});
  m.Add("c_total", {{"result", "success"}}, 2);
  m.Add("c_total", {{"result", "err\"or\n"}});
  m.Set("g", {}, 0.25);
  m.Observe("h_seconds", {{"event", "Create"}}, 0.0625);
  m.Observe("h_seconds", {{"event", "Create"}}, 0.5);
  m.Observe("h_seconds", {{"event", "Create"}}, 7);
  // Undeclared families and type mismatches are ignored, not fatal.
  m.Add("nope_total", {});
  m.Observe("g", {}, 1);
  m.Set("c_total", {}, 5);

  std::string text = m.Render();
  EXPECT_THAT(text, HasSubstr("# HELP c_total A counter\\nwith a \\\\ newline.\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE c_total counter\n"));
  EXPECT_THAT(text, HasSubstr("c_total{result=\"success\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("c_total{result=\"err\\\"or\\n\"} 1\n"));
  EXPECT_THAT(text, Not(HasSubstr("c_total 5")));
  EXPECT_THAT(text, HasSubstr("# TYPE g gauge\ng 0.25\n"));
  EXPECT_THAT(text, HasSubstr("h_seconds_bucket{event=\"Create\",le=\"0.1\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("h_seconds_bucket{event=\"Create\",le=\"1\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("h_seconds_bucket{event=\"Create\",le=\"+Inf\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("h_seconds_sum{event=\"Create\"} 7.5625\n"));
  EXPECT_THAT(text, HasSubstr("h_seconds_count{event=\"Create\"} 3\n"));
  EXPECT_THAT(text, Not(HasSubstr("nope_total")));
  EXPECT_EQ(m.Value("c_total", {{"result", "success"}}), 3);
  EXPECT_EQ(m.Count("h_seconds", {{"event", "Create"}}), 3);

  m.ClearGauge("g");
  EXPECT_THAT(m.Render(), Not(HasSubstr("g 0.25")));
}

TEST(MetricsTest, CollectorRunsAtEveryRender) {
  MetricsRegistry m;
  m.DeclareGauge("scrapes", "Renders so far.");
  int scrapes = 0;
  m.SetCollector([&](MetricsRegistry& r) { r.Set("scrapes", {}, ++scrapes); });
  m.Render();
  EXPECT_THAT(m.Render(), HasSubstr("scrapes 2\n"));
}

TEST(MetricsTest, FormatsValuesAsPrometheusParsesThem) {
  EXPECT_EQ(FormatMetricValue(3), "3");
  EXPECT_EQ(FormatMetricValue(0.1), "0.1");
  EXPECT_EQ(FormatMetricValue(0.00025), "0.00025");
  EXPECT_EQ(FormatMetricValue(1.0 / 0.0), "+Inf");
  EXPECT_EQ(FormatMetricValue(-1.0 / 0.0), "-Inf");
}

}  // namespace
}  // namespace devlet::node
