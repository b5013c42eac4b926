// File: devlet/node/metrics.h
//
// MetricsRegistry: the few Prometheus metrics devlet-node exposes on /metrics, rendered in the
// text exposition format 0.0.4. Families are declared once (name, help, type; histograms with
// their bucket bounds), then updated by name with label sets. Thread-safe; updates take one
// mutex, which is cheap next to the gRPC / NRI calls they measure.
//
//   MetricsRegistry metrics;
//   metrics.DeclareHistogram("devlet_node_nri_event_duration_seconds", "...", kLatencyBuckets);
//   metrics.Observe("devlet_node_nri_event_duration_seconds", {{"event", "CreateContainer"}}, 0.0004);
//   std::string text = metrics.Render();
//
// The names devlet-node uses are the k*Metric constants below.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace devlet::node {

// Label set of one series: (name, value) pairs, rendered in the given order.
using MetricLabels = std::vector<std::pair<std::string, std::string>>;

// Latency buckets in seconds, from 100 µs (an NRI event) to 10 s (a slow hardware prepare).
inline const std::vector<double> kLatencyBuckets = {0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                                                    0.005,  0.01,    0.025,  0.05,  0.1,
                                                    0.25,   0.5,     1,      2.5,   5,
                                                    10};

// devlet-node's metric names.
inline constexpr std::string_view kPrepareTotalMetric = "devlet_node_device_prepare_total";
inline constexpr std::string_view kPrepareDurationMetric =
    "devlet_node_device_prepare_duration_seconds";
inline constexpr std::string_view kUnprepareTotalMetric = "devlet_node_device_unprepare_total";
inline constexpr std::string_view kUnprepareDurationMetric =
    "devlet_node_device_unprepare_duration_seconds";
inline constexpr std::string_view kNriEventsMetric = "devlet_node_nri_events_total";
inline constexpr std::string_view kNriDurationMetric = "devlet_node_nri_event_duration_seconds";
inline constexpr std::string_view kDevicesMetric = "devlet_node_devices";
inline constexpr std::string_view kSliceGenerationMetric = "devlet_node_resourceslice_generation";
inline constexpr std::string_view kSlicePublishesMetric = "devlet_node_resourceslice_publishes_total";
inline constexpr std::string_view kRegisteredMetric = "devlet_node_kubelet_registered";
inline constexpr std::string_view kNriConnectedMetric = "devlet_node_nri_connected";
inline constexpr std::string_view kPreparedClaimsMetric = "devlet_node_prepared_claims";

// MetricsRegistry holds counters, gauges and histograms. Updating an undeclared family, or one of
// another type, is ignored (a programming error must not take the node agent down).
class MetricsRegistry {
 public:
  enum class Type { kCounter, kGauge, kHistogram };

  void DeclareCounter(std::string_view name, std::string_view help);
  void DeclareGauge(std::string_view name, std::string_view help);
  // `buckets`: ascending upper bounds; +Inf is implied.
  void DeclareHistogram(std::string_view name, std::string_view help, std::vector<double> buckets);

  // Add increases a counter (or a gauge) by `value`.
  void Add(std::string_view name, const MetricLabels& labels, double value = 1);
  // Set sets a gauge.
  void Set(std::string_view name, const MetricLabels& labels, double value);
  // ClearGauge removes every series of a gauge (before setting a fresh set of label values, so
  // that values that disappeared are not reported any more).
  void ClearGauge(std::string_view name);
  // Observe records one histogram sample.
  void Observe(std::string_view name, const MetricLabels& labels, double value);

  // Value returns a counter's or gauge's current value (0 when absent); for tests and logs.
  double Value(std::string_view name, const MetricLabels& labels) const;
  // Count returns how many samples a histogram series holds.
  long Count(std::string_view name, const MetricLabels& labels) const;

  // SetCollector registers a function run at the start of every Render (for gauges that are read
  // from state at scrape time). Replaces a previous one.
  void SetCollector(std::function<void(MetricsRegistry&)> collector);

  // Render returns every family in the text exposition format (families and series sorted).
  std::string Render();

 private:
  struct Histogram {
    std::vector<long> counts;  // per bucket, not cumulative; last entry is +Inf
    double sum = 0;
    long count = 0;
  };
  struct Family {
    Type type = Type::kCounter;
    std::string help;
    std::vector<double> buckets;
    std::map<MetricLabels, double> values;
    std::map<MetricLabels, Histogram> histograms;
  };
  Family* Find(std::string_view name, Type type);

  mutable std::mutex mu_;
  std::map<std::string, Family, std::less<>> families_;
  std::function<void(MetricsRegistry&)> collector_;
};

// FormatMetricValue renders a sample value the way Prometheus parses it ("3", "0.25", "+Inf").
std::string FormatMetricValue(double value);

}  // namespace devlet::node
