// mean_iou and mean_per_class_accuracy: one batch's weighted confusion matrix.
#include <string>

#include "nn/metrics.h"
#include "nn/metrics_input.h"
#include "nn/metrics_state.h"
#include "ops/error.h"

namespace est::nn::metrics {
namespace {

MetricOp confusion(detail::ConfusionMetric::Kind kind, const char* metric, const Tensor& labels,
                   const Tensor& predictions, int64_t num_classes, const Tensor& weights) {
  if (num_classes < 1)
    throw InvalidArgumentError(std::string(metric) + ": num_classes must be positive, got " +
                               std::to_string(num_classes));
  Shape shape = detail::matching_shape(labels, predictions, metric);
  std::vector<int64_t> label_ids = detail::class_ids_of(labels, metric, "labels");
  std::vector<int64_t> prediction_ids = detail::class_ids_of(predictions, metric, "predictions");
  std::vector<double> weight_values = detail::broadcast_weights(weights, shape, metric);
  auto check = [&](int64_t id, size_t index, const char* what) {
    if (id < 0 || id >= num_classes)
      throw InvalidArgumentError(std::string(metric) + ": " + what + " element " +
                                 std::to_string(index) + " is class id " + std::to_string(id) +
                                 ", outside [0, " + std::to_string(num_classes) +
                                 "); check num_classes or the " + what);
  };
  auto state = std::make_shared<detail::ConfusionMetric>(kind, num_classes);
  for (size_t i = 0; i < label_ids.size(); ++i) {
    check(label_ids[i], i, "labels");
    check(prediction_ids[i], i, "predictions");
    state->add(label_ids[i], prediction_ids[i], weight_values[i]);
  }
  return {state};
}

}  // namespace

MetricOp mean_iou(const Tensor& labels, const Tensor& predictions, int64_t num_classes,
                  const Tensor& weights) {
  return confusion(detail::ConfusionMetric::Kind::kMeanIou, "mean_iou", labels, predictions,
                   num_classes, weights);
}

MetricOp mean_per_class_accuracy(const Tensor& labels, const Tensor& predictions,
                                 int64_t num_classes, const Tensor& weights) {
  return confusion(detail::ConfusionMetric::Kind::kMeanPerClassAccuracy, "mean_per_class_accuracy",
                   labels, predictions, num_classes, weights);
}

}  // namespace est::nn::metrics
