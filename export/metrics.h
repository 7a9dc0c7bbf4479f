// Metrics as TensorFlow's monitoring library keeps them (tensorflow/core/lib/monitoring/:
// Counter, Gauge, Sampler with exponential buckets) and as TF Serving exports them in
// Prometheus's text exposition format (tensorflow_serving/util/prometheus_exporter.cc): every
// metric, in the order of its TF name, with a "# TYPE" line (written even before it has a
// value), its name with every character outside [a-zA-Z0-9_] made ':'
// ("/tensorflow/serving/request_count" -> ":tensorflow:serving:request_count"), one line a
// label set; a histogram as cumulative NAME_bucket{...,le="limit"} lines (the last
// le="+Inf"), then NAME_sum and NAME_count. As TF's Histogram does, a value falls in the first
// bucket whose limit is above it. Label values have \ and " escaped.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace est::serving::metrics {

enum class Kind { kCounter, kGauge, kHistogram };

struct Descriptor {
  std::string name;  // TF's name: "/tensorflow/serving/request_count"
  Kind kind = Kind::kCounter;
  std::vector<std::string> labels;
  std::vector<double> buckets;  // a histogram's limits, increasing; +Inf is implied after them
};

// TF's Buckets::Exponential(scale, growth_factor, bucket_count): scale * growth^i, i < count.
std::vector<double> exponential_buckets(double scale, double growth, int count);

// TF Serving's Prometheus name of a TF metric name.
std::string prometheus_name(std::string_view tf_name);

class Registry {
 public:
  // InvalidArgumentError for a repeated name or a histogram without buckets.
  explicit Registry(const std::vector<Descriptor>& descriptors);

  // A counter increased, a gauge set, a histogram given a value, for the label values given
  // (as many as its labels). InvalidArgumentError for an unknown metric, a metric of another
  // kind or a wrong number of label values: a bug of the caller.
  void increment(std::string_view name, const std::vector<std::string>& labels, int64_t by = 1);
  void set(std::string_view name, const std::vector<std::string>& labels, int64_t value);
  void observe(std::string_view name, const std::vector<std::string>& labels, double value);

  // A counter's or gauge's value, or a histogram's count, for those labels (0 when none yet).
  int64_t value(std::string_view name, const std::vector<std::string>& labels) const;

  // Every metric in Prometheus's text format, each line ended by '\n'.
  std::string exposition() const;

 private:
  struct Cell {
    int64_t value = 0;            // counter, gauge; a histogram's count
    std::vector<int64_t> counts;  // histogram: one a bucket, +Inf last
    double sum = 0;
  };
  struct Metric {
    Descriptor descriptor;
    std::map<std::vector<std::string>, Cell> cells;
  };
  Cell& cell(std::string_view name, const std::vector<std::string>& labels, Kind kind);

  mutable std::mutex mutex_;
  std::map<std::string, Metric, std::less<>> metrics_;
};

}  // namespace est::serving::metrics
