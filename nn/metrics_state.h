// The accumulators behind the metric functions: every statistic is a sum, so merge() is
// addition and its order does not matter. Internal to nn/metrics*.cpp (tests reach them only
// through the Metric interface).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "nn/metrics.h"

namespace est::nn::metrics::detail {

// Weighted sum and weight total: mean, accuracy, mean_squared_error, mean_absolute_error,
// root_mean_squared_error (`root` takes the square root of the result).
class MeanMetric : public Metric {
 public:
  MeanMetric(std::string name, bool root, double total, double count)
      : name_(std::move(name)), root_(root), total_(total), count_(count) {}
  std::string_view name() const override { return name_; }
  void merge(const Metric& other) override;
  double result() const override;
  void reset() override { total_ = count_ = 0; }
  std::unique_ptr<Metric> clone() const override { return std::make_unique<MeanMetric>(*this); }

 private:
  std::string name_;
  bool root_;
  double total_;  // sum(values * weights)
  double count_;  // sum(weights)
};

// hits / (hits + misses): precision (misses = false positives), recall (false negatives), and
// their @k forms. `config` (k, class_id) must match to merge; `nan_when_empty` is TF1's @k
// behaviour (0/0 is NaN), otherwise 0/0 is 0.
class RatioMetric : public Metric {
 public:
  RatioMetric(std::string name, std::string config, bool nan_when_empty, double hits, double misses)
      : name_(std::move(name)),
        config_(std::move(config)),
        nan_when_empty_(nan_when_empty),
        hits_(hits),
        misses_(misses) {}
  std::string_view name() const override { return name_; }
  void merge(const Metric& other) override;
  double result() const override;
  void reset() override { hits_ = misses_ = 0; }
  std::unique_ptr<Metric> clone() const override { return std::make_unique<RatioMetric>(*this); }

 private:
  std::string name_;
  std::string config_;
  bool nan_when_empty_;
  double hits_;
  double misses_;
};

// Confusion counts at each threshold, and the curve's area. The statistics are, per label
// value, the weight of examples by how many thresholds they are above (a histogram over
// num_thresholds + 1 buckets); tp/fn/tn/fp at each threshold are its cumulative sums.
class AucMetric : public Metric {
 public:
  AucMetric(int num_thresholds, AucCurve curve, AucSummation summation);
  std::string_view name() const override { return "auc"; }
  void merge(const Metric& other) override;
  double result() const override;
  void reset() override;
  std::unique_ptr<Metric> clone() const override { return std::make_unique<AucMetric>(*this); }

  // The thresholds TF1 uses: -1e-7, 1/(n-1), ..., (n-2)/(n-1), 1 + 1e-7.
  static std::vector<double> thresholds(int num_thresholds);
  // Adds one example. As in TF1 the comparison `prediction > threshold` is made in float32.
  void add(bool label, double prediction, double weight);

  struct Counts {
    std::vector<double> true_positives, false_negatives, true_negatives, false_positives;
  };
  Counts counts() const;  // each [num_thresholds]

 private:
  int num_thresholds_;
  AucCurve curve_;
  AucSummation summation_;
  std::vector<float> thresholds_;         // [num_thresholds], float32 as in TF1
  std::vector<double> positive_buckets_;  // [num_thresholds + 1]: weight of label-true examples
                                          // above exactly i thresholds
  std::vector<double> negative_buckets_;  // [num_thresholds + 1]: the same for label-false ones
};

// A weighted confusion matrix: mean_iou and mean_per_class_accuracy.
class ConfusionMetric : public Metric {
 public:
  enum class Kind : uint8_t { kMeanIou, kMeanPerClassAccuracy };
  ConfusionMetric(Kind kind, int64_t num_classes);
  std::string_view name() const override;
  void merge(const Metric& other) override;
  double result() const override;
  void reset() override;
  std::unique_ptr<Metric> clone() const override {
    return std::make_unique<ConfusionMetric>(*this);
  }

  void add(int64_t label, int64_t prediction, double weight);

 private:
  Kind kind_;
  int64_t num_classes_;
  std::vector<double> matrix_;  // [num_classes (label), num_classes (prediction)]
};

}  // namespace est::nn::metrics::detail
