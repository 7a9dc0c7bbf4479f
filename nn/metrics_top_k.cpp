// precision_at_k and recall_at_k: the top k classes of each row of scores against that row's
// set of label ids (TF1's sparse set arithmetic, on the host).
#include <algorithm>
#include <numeric>
#include <string>

#include "nn/metrics.h"
#include "nn/metrics_input.h"
#include "nn/metrics_state.h"
#include "ops/error.h"

namespace est::nn::metrics {
namespace {

enum class AtK : uint8_t { kPrecision, kRecall };

MetricOp at_k(AtK kind, const Tensor& labels, const Tensor& predictions, int64_t k,
              std::optional<int64_t> class_id, const Tensor& weights) {
  const char* metric = kind == AtK::kPrecision ? "precision_at_k" : "recall_at_k";
  if (k < 1)
    throw InvalidArgumentError(std::string(metric) + ": k must be >= 1, got " + std::to_string(k));
  std::vector<double> scores = detail::values_of(predictions, metric, "predictions");
  std::vector<int64_t> label_ids = detail::class_ids_of(labels, metric, "labels");
  const Shape& score_shape = predictions.shape();
  if (score_shape.empty())
    throw InvalidArgumentError(std::string(metric) +
                               ": predictions must be [..., num_classes], got a scalar");
  const int64_t num_classes = score_shape.back();
  if (k > num_classes)
    throw InvalidArgumentError(std::string(metric) + ": k = " + std::to_string(k) +
                               " exceeds the " + std::to_string(num_classes) +
                               " classes of predictions " + ops::shape_str(score_shape));
  if (class_id && (*class_id < 0 || *class_id >= num_classes))
    throw InvalidArgumentError(std::string(metric) + ": class_id " + std::to_string(*class_id) +
                               " is outside [0, " + std::to_string(num_classes) +
                               ") for predictions " + ops::shape_str(score_shape));

  // Rows are the leading dimensions [D1, ..., DN]; labels are [D1, ..., DN] or
  // [D1, ..., DN, num_labels].
  Shape row_shape(score_shape.begin(), score_shape.end() - 1);
  Shape label_shape = labels.shape();
  int64_t labels_per_row = 1;
  if (label_shape.size() == score_shape.size()) {
    labels_per_row = label_shape.back();
    label_shape.pop_back();
  }
  if (label_shape != row_shape)
    throw InvalidArgumentError(std::string(metric) + ": labels " + ops::shape_str(labels.shape()) +
                               " do not match predictions " + ops::shape_str(score_shape) +
                               "; labels must be [D1, ..., DN] or [D1, ..., DN, num_labels] for "
                               "predictions [D1, ..., DN, num_classes]");
  std::vector<double> weight_values = detail::broadcast_weights(weights, row_shape, metric);

  const int64_t rows = ops::num_elements(row_shape);
  const int64_t taken = k;
  std::vector<int64_t> order(static_cast<size_t>(num_classes));
  std::vector<int64_t> row_labels;
  double hits = 0;
  double misses = 0;
  for (int64_t row = 0; row < rows; ++row) {
    const double* row_scores = scores.data() + row * num_classes;
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + taken, order.end(), [&](int64_t a, int64_t b) {
      if (row_scores[a] != row_scores[b]) return row_scores[a] > row_scores[b];
      return a < b;
    });
    std::vector<int64_t> top(order.begin(), order.begin() + taken);
    std::sort(top.begin(), top.end());
    row_labels.assign(label_ids.begin() + row * labels_per_row,
                      label_ids.begin() + (row + 1) * labels_per_row);
    std::sort(row_labels.begin(), row_labels.end());
    row_labels.erase(std::unique(row_labels.begin(), row_labels.end()), row_labels.end());
    if (class_id) {
      // Only `class_id` counts: both sets keep it or nothing.
      auto keep_only = [&](std::vector<int64_t>& set) {
        bool has = std::binary_search(set.begin(), set.end(), *class_id);
        set.assign(has ? 1 : 0, *class_id);
      };
      keep_only(top);
      keep_only(row_labels);
    }
    auto in = [](const std::vector<int64_t>& set, int64_t id) {
      return std::binary_search(set.begin(), set.end(), id);
    };
    double weight = weight_values[static_cast<size_t>(row)];
    int64_t true_positives = 0;
    for (int64_t id : top) true_positives += in(row_labels, id) ? 1 : 0;
    hits += weight * static_cast<double>(true_positives);
    if (kind == AtK::kPrecision) {
      misses += weight * static_cast<double>(static_cast<int64_t>(top.size()) - true_positives);
    } else {
      // Every label not retrieved, including ids outside [0, num_classes).
      misses +=
          weight * static_cast<double>(static_cast<int64_t>(row_labels.size()) - true_positives);
    }
  }
  std::string config = "(k=" + std::to_string(k) +
                       (class_id ? ", class_id=" + std::to_string(*class_id) : std::string()) + ")";
  return {std::make_shared<detail::RatioMetric>(metric, config, true, hits, misses)};
}

}  // namespace

MetricOp precision_at_k(const Tensor& labels, const Tensor& predictions, int64_t k,
                        std::optional<int64_t> class_id, const Tensor& weights) {
  return at_k(AtK::kPrecision, labels, predictions, k, class_id, weights);
}

MetricOp recall_at_k(const Tensor& labels, const Tensor& predictions, int64_t k,
                     std::optional<int64_t> class_id, const Tensor& weights) {
  return at_k(AtK::kRecall, labels, predictions, k, class_id, weights);
}

}  // namespace est::nn::metrics
