// Streaming evaluation metrics with tf.compat.v1.metrics semantics.
//
// A metric call inside model_fn computes the batch's sufficient statistics on the host (counts,
// sums, a confusion matrix, per-threshold counts) and returns a MetricOp holding a Metric: a small
// accumulator that can merge() another one of its kind, report result(), reset() and clone()
// itself. The Estimator keeps one running Metric per eval_metric_ops key: the first batch's is
// cloned, later batches are merged into it, and result() is the value TF would report after the
// last update_op. merge() is also how replicas' statistics are combined, so every statistic is a
// sum and merging is order-independent.
//
// Statistics are read from the tensors' values only (no gradients, nothing recorded on the tape).
// Weights are optional (an undefined Tensor means all ones) and broadcast as TF1 does: a scalar,
// or a tensor of the values' rank (one trailing dimension may be missing or extra) whose
// dimensions are 1 or equal to the values' dimensions. Shape errors name the metric and shapes.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "ops/error.h"
#include "ops/tensor.h"

namespace est::nn::metrics {

// One metric's running statistics.
class Metric {
 public:
  virtual ~Metric() = default;
  // The metric function that made it ("accuracy", "auc", ...), for errors and logs.
  virtual std::string_view name() const = 0;
  // Adds `other`'s statistics to this one. `other` must come from the same metric function with
  // the same configuration (num_thresholds, num_classes, k, ...): InvalidArgumentError otherwise.
  virtual void merge(const Metric& other) = 0;
  // The metric's value over everything merged so far.
  virtual double result() const = 0;
  // Back to no data (result() as for an empty stream).
  virtual void reset() = 0;
  // An independent copy with the same statistics.
  virtual std::unique_ptr<Metric> clone() const = 0;
};

// What a metric function returns: the batch's statistics. In TF1 terms, `metric` is the pair of
// local variables after this batch's update_op, and result() is the value tensor.
struct MetricOp {
  std::shared_ptr<Metric> metric;
  double result() const {
    if (!metric)
      throw FailedPreconditionError(
          "MetricOp::result: this MetricOp holds no metric; build it with a metric function "
          "such as est::metrics::accuracy(labels, predictions)");
    return metric->result();
  }
};

// Fraction of elements where predictions == labels (weighted). labels and predictions have the
// same shape (one trailing dimension of size 1 is squeezed, as TF1 does); any dtypes.
MetricOp accuracy(const Tensor& labels, const Tensor& predictions, const Tensor& weights = {});

// Weighted mean of `values`: sum(values * weights) / sum(weights); 0 before any weight.
MetricOp mean(const Tensor& values, const Tensor& weights = {});

// Both are cast to bool (non-zero is true), as TF1 does.
// precision = true_positives / (true_positives + false_positives); 0 when nothing is predicted.
MetricOp precision(const Tensor& labels, const Tensor& predictions, const Tensor& weights = {});
// recall = true_positives / (true_positives + false_negatives); 0 when no label is positive.
MetricOp recall(const Tensor& labels, const Tensor& predictions, const Tensor& weights = {});

enum class AucCurve : uint8_t { kROC, kPR };
enum class AucSummation : uint8_t {
  kTrapezoidal,          // TF1's default
  kMinoring,             // lower bound: the smaller height of each step
  kMajoring,             // upper bound: the larger height
  kCarefulInterpolation  // PR only (as ROC it is the trapezoidal rule): Davis & Goadrich
};

// Area under the ROC or PR curve, from counts at `num_thresholds` thresholds evenly spaced over
// [0, 1] (the first at -1e-7 and the last at 1 + 1e-7, as TF1). labels are cast to bool;
// predictions must lie in [0, 1]. num_thresholds >= 2.
MetricOp auc(const Tensor& labels, const Tensor& predictions, const Tensor& weights = {},
             int num_thresholds = 200, AucCurve curve = AucCurve::kROC,
             AucSummation summation_method = AucSummation::kTrapezoidal);

// Weighted means of (predictions - labels)^2 and |predictions - labels|, and the root of the
// former (the root of the streamed mean, not a mean of roots). Same shapes as accuracy.
MetricOp mean_squared_error(const Tensor& labels, const Tensor& predictions,
                            const Tensor& weights = {});
MetricOp root_mean_squared_error(const Tensor& labels, const Tensor& predictions,
                                 const Tensor& weights = {});
MetricOp mean_absolute_error(const Tensor& labels, const Tensor& predictions,
                             const Tensor& weights = {});

// Top-k metrics against sparse labels, as tf.compat.v1.metrics.precision_at_k / recall_at_k.
// predictions: [D1, ..., DN, num_classes] scores (the top k per row are taken, ties to the lower
// class id); labels: integer class ids [D1, ..., DN] or [D1, ..., DN, num_labels], each row a
// set. Labels outside [0, num_classes) are ignored by precision and count as false negatives
// for recall. With class_id, only that class counts. weights broadcast to [D1, ..., DN].
// Result tp / (tp + fp) (resp. tp / (tp + fn)); NaN when the denominator is 0, as in TF1.
MetricOp precision_at_k(const Tensor& labels, const Tensor& predictions, int64_t k,
                        std::optional<int64_t> class_id = std::nullopt, const Tensor& weights = {});
MetricOp recall_at_k(const Tensor& labels, const Tensor& predictions, int64_t k,
                     std::optional<int64_t> class_id = std::nullopt, const Tensor& weights = {});

// From a streaming [num_classes, num_classes] confusion matrix (rows: labels, columns:
// predictions) of integer class ids in [0, num_classes), flattened, weighted.
// mean_iou: mean over classes that appear (in labels or predictions) of
// tp / (tp + fp + fn).
MetricOp mean_iou(const Tensor& labels, const Tensor& predictions, int64_t num_classes,
                  const Tensor& weights = {});
// mean_per_class_accuracy: mean over all num_classes classes of correct / total for that label
// (a class never seen as a label contributes 0, as in TF1).
MetricOp mean_per_class_accuracy(const Tensor& labels, const Tensor& predictions,
                                 int64_t num_classes, const Tensor& weights = {});

}  // namespace est::nn::metrics

namespace est {
namespace metrics = nn::metrics;
}  // namespace est
