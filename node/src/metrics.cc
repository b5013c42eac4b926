#include "devlet/node/metrics.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace devlet::node {
namespace {

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string EscapeHelp(std::string_view help) {
  std::string out;
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

// LabelText renders {a="x",b="y"} plus an optional extra label (the histogram's le).
std::string LabelText(const MetricLabels& labels, std::string_view extra_name = {},
                      std::string_view extra_value = {}) {
  if (labels.empty() && extra_name.empty()) return "";
  std::string out = "{";
  bool first = true;
  for (const auto& [name, value] : labels) {
    if (!first) out += ",";
    first = false;
    out += name + "=\"" + EscapeLabelValue(value) + "\"";
  }
  if (!extra_name.empty()) {
    if (!first) out += ",";
    out += std::string(extra_name) + "=\"" + std::string(extra_value) + "\"";
  }
  return out + "}";
}

std::string_view TypeName(MetricsRegistry::Type type) {
  switch (type) {
    case MetricsRegistry::Type::kCounter:
      return "counter";
    case MetricsRegistry::Type::kGauge:
      return "gauge";
    case MetricsRegistry::Type::kHistogram:
      return "histogram";
  }
  return "untyped";
}

}  // namespace

std::string FormatMetricValue(double value) {
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (std::isnan(value)) return "NaN";
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.17g", value);
  // %.17g shows binary noise (0.10000000000000001); take the shortest form that reads back equal.
  for (int precision = 1; precision <= 17; ++precision) {
    char shorter[32];
    std::snprintf(shorter, sizeof(shorter), "%.*g", precision, value);
    if (std::strtod(shorter, nullptr) == value) return shorter;
  }
  return buffer;
}

void MetricsRegistry::DeclareCounter(std::string_view name, std::string_view help) {
  std::lock_guard<std::mutex> lock(mu_);
  Family& family = families_[std::string(name)];
  family.type = Type::kCounter;
  family.help = std::string(help);
}

void MetricsRegistry::DeclareGauge(std::string_view name, std::string_view help) {
  std::lock_guard<std::mutex> lock(mu_);
  Family& family = families_[std::string(name)];
  family.type = Type::kGauge;
  family.help = std::string(help);
}

void MetricsRegistry::DeclareHistogram(std::string_view name, std::string_view help,
                                       std::vector<double> buckets) {
  std::lock_guard<std::mutex> lock(mu_);
  Family& family = families_[std::string(name)];
  family.type = Type::kHistogram;
  family.help = std::string(help);
  family.buckets = std::move(buckets);
}

MetricsRegistry::Family* MetricsRegistry::Find(std::string_view name, Type type) {
  auto it = families_.find(name);
  if (it == families_.end() || it->second.type != type) return nullptr;
  return &it->second;
}

void MetricsRegistry::Add(std::string_view name, const MetricLabels& labels, double value) {
  std::lock_guard<std::mutex> lock(mu_);
  Family* family = Find(name, Type::kCounter);
  if (family == nullptr) family = Find(name, Type::kGauge);
  if (family == nullptr) return;
  family->values[labels] += value;
}

void MetricsRegistry::Set(std::string_view name, const MetricLabels& labels, double value) {
  std::lock_guard<std::mutex> lock(mu_);
  if (Family* family = Find(name, Type::kGauge)) family->values[labels] = value;
}

void MetricsRegistry::ClearGauge(std::string_view name) {
  std::lock_guard<std::mutex> lock(mu_);
  if (Family* family = Find(name, Type::kGauge)) family->values.clear();
}

void MetricsRegistry::Observe(std::string_view name, const MetricLabels& labels, double value) {
  std::lock_guard<std::mutex> lock(mu_);
  Family* family = Find(name, Type::kHistogram);
  if (family == nullptr) return;
  Histogram& h = family->histograms[labels];
  if (h.counts.empty()) h.counts.assign(family->buckets.size() + 1, 0);
  size_t bucket = 0;
  while (bucket < family->buckets.size() && value > family->buckets[bucket]) ++bucket;
  ++h.counts[bucket];
  h.sum += value;
  ++h.count;
}

double MetricsRegistry::Value(std::string_view name, const MetricLabels& labels) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = families_.find(name);
  if (it == families_.end()) return 0;
  auto value = it->second.values.find(labels);
  return value == it->second.values.end() ? 0 : value->second;
}

long MetricsRegistry::Count(std::string_view name, const MetricLabels& labels) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = families_.find(name);
  if (it == families_.end()) return 0;
  auto h = it->second.histograms.find(labels);
  return h == it->second.histograms.end() ? 0 : h->second.count;
}

void MetricsRegistry::SetCollector(std::function<void(MetricsRegistry&)> collector) {
  std::lock_guard<std::mutex> lock(mu_);
  collector_ = std::move(collector);
}

std::string MetricsRegistry::Render() {
  std::function<void(MetricsRegistry&)> collector;
  {
    std::lock_guard<std::mutex> lock(mu_);
    collector = collector_;
  }
  if (collector) collector(*this);  // outside the lock: it calls Set
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  for (const auto& [name, family] : families_) {
    out += "# HELP " + name + " " + EscapeHelp(family.help) + "\n";
    out += "# TYPE " + name + " " + std::string(TypeName(family.type)) + "\n";
    if (family.type != Type::kHistogram) {
      for (const auto& [labels, value] : family.values) {
        out += name + LabelText(labels) + " " + FormatMetricValue(value) + "\n";
      }
      continue;
    }
    for (const auto& [labels, h] : family.histograms) {
      long cumulative = 0;
      for (size_t i = 0; i < h.counts.size(); ++i) {
        cumulative += h.counts[i];
        std::string le = i < family.buckets.size() ? FormatMetricValue(family.buckets[i]) : "+Inf";
        out += name + "_bucket" + LabelText(labels, "le", le) + " " + std::to_string(cumulative) +
               "\n";
      }
      out += name + "_sum" + LabelText(labels) + " " + FormatMetricValue(h.sum) + "\n";
      out += name + "_count" + LabelText(labels) + " " + std::to_string(h.count) + "\n";
    }
  }
  return out;
}

}  // namespace devlet::node
