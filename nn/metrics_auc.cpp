// auc: per-threshold confusion counts of one batch (TF1's _confusion_matrix_at_thresholds).
#include <cmath>
#include <string>

#include "nn/metrics.h"
#include "nn/metrics_input.h"
#include "nn/metrics_state.h"
#include "ops/error.h"

namespace est::nn::metrics {

MetricOp auc(const Tensor& labels, const Tensor& predictions, const Tensor& weights,
             int num_thresholds, AucCurve curve, AucSummation summation_method) {
  const char* metric = "auc";
  if (num_thresholds < 2)
    throw InvalidArgumentError("auc: num_thresholds must be at least 2, got " +
                               std::to_string(num_thresholds) + " (TF's default is 200)");
  auto [label_values, prediction_values, weight_values] =
      detail::paired_values(labels, predictions, weights, metric);
  auto state = std::make_shared<detail::AucMetric>(num_thresholds, curve, summation_method);
  for (size_t i = 0; i < prediction_values.size(); ++i) {
    double prediction = prediction_values[i];
    if (!(prediction >= 0.0 && prediction <= 1.0))
      throw InvalidArgumentError(
          "auc: predictions must lie in [0, 1], but element " + std::to_string(i) +
          " of predictions " + ops::shape_str(predictions.shape()) + " is " +
          std::to_string(prediction) + "; pass probabilities (e.g. sigmoid of the logits)");
    state->add(label_values[i] != 0, prediction, weight_values[i]);
  }
  return {state};
}

}  // namespace est::nn::metrics
