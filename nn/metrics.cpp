// The elementwise metrics: mean and its relatives (accuracy, errors) and precision/recall.
// Each reads the batch on the host and returns the batch's statistics (see nn/metrics.h).
#include "nn/metrics.h"

#include <cmath>
#include <string>

#include "nn/metrics_input.h"
#include "nn/metrics_state.h"
#include "ops/error.h"

namespace est::nn::metrics {
namespace {

using detail::broadcast_weights;
using detail::values_of;

// The weighted mean of f(label, prediction) over matching labels and predictions.
template <class Fn>
MetricOp mean_of(const char* metric, bool root, const Tensor& labels, const Tensor& predictions,
                 const Tensor& weights, Fn&& fn) {
  auto [label_values, prediction_values, weight_values] =
      detail::paired_values(labels, predictions, weights, metric);
  double total = 0;
  double count = 0;
  for (size_t i = 0; i < label_values.size(); ++i) {
    total += fn(label_values[i], prediction_values[i]) * weight_values[i];
    count += weight_values[i];
  }
  return {std::make_shared<detail::MeanMetric>(metric, root, total, count)};
}

// Weighted true positives and the weighted misses selected by `count_miss(label, predicted)`.
template <class Fn>
MetricOp ratio_of(const char* metric, const Tensor& labels, const Tensor& predictions,
                  const Tensor& weights, Fn&& count_miss) {
  auto [label_values, prediction_values, weight_values] =
      detail::paired_values(labels, predictions, weights, metric);
  double hits = 0;
  double misses = 0;
  for (size_t i = 0; i < label_values.size(); ++i) {
    bool label = label_values[i] != 0;  // TF1 casts both to bool
    bool predicted = prediction_values[i] != 0;
    if (label && predicted) hits += weight_values[i];
    if (count_miss(label, predicted)) misses += weight_values[i];
  }
  return {std::make_shared<detail::RatioMetric>(metric, "", false, hits, misses)};
}

}  // namespace

MetricOp accuracy(const Tensor& labels, const Tensor& predictions, const Tensor& weights) {
  return mean_of("accuracy", false, labels, predictions, weights,
                 [](double label, double prediction) { return label == prediction ? 1.0 : 0.0; });
}

MetricOp mean(const Tensor& values, const Tensor& weights) {
  const char* metric = "mean";
  std::vector<double> value_data = values_of(values, metric, "values");
  std::vector<double> weight_values = broadcast_weights(weights, values.shape(), metric);
  double total = 0;
  double count = 0;
  for (size_t i = 0; i < value_data.size(); ++i) {
    total += value_data[i] * weight_values[i];
    count += weight_values[i];
  }
  return {std::make_shared<detail::MeanMetric>(metric, false, total, count)};
}

MetricOp precision(const Tensor& labels, const Tensor& predictions, const Tensor& weights) {
  return ratio_of("precision", labels, predictions, weights,
                  [](bool label, bool predicted) { return predicted && !label; });
}

MetricOp recall(const Tensor& labels, const Tensor& predictions, const Tensor& weights) {
  return ratio_of("recall", labels, predictions, weights,
                  [](bool label, bool predicted) { return label && !predicted; });
}

MetricOp mean_squared_error(const Tensor& labels, const Tensor& predictions,
                            const Tensor& weights) {
  return mean_of(
      "mean_squared_error", false, labels, predictions, weights,
      [](double label, double prediction) { return (prediction - label) * (prediction - label); });
}

MetricOp root_mean_squared_error(const Tensor& labels, const Tensor& predictions,
                                 const Tensor& weights) {
  return mean_of(
      "root_mean_squared_error", true, labels, predictions, weights,
      [](double label, double prediction) { return (prediction - label) * (prediction - label); });
}

MetricOp mean_absolute_error(const Tensor& labels, const Tensor& predictions,
                             const Tensor& weights) {
  return mean_of("mean_absolute_error", false, labels, predictions, weights,
                 [](double label, double prediction) { return std::abs(prediction - label); });
}

}  // namespace est::nn::metrics
