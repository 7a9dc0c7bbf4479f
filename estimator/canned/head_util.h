// What the heads share besides the Head base class (tensorflow/estimator head/base_head.py's
// helpers): label and weight checks with messages naming the head, all_class_ids, the
// derived accuracy_baseline metric, and class ids as TF's string classes.
#pragma once

#include <cstdint>
#include <string>

#include "estimator/estimator_spec.h"
#include "nn/metrics.h"
#include "ops/tensor.h"

namespace est::canned::detail {

using ops::Tensor;

// Labels [batch] or [batch, labels_dimension] (batch as the logits'), returned as
// [batch, labels_dimension]: base_head.check_dense_labels_match_logits_and_reshape.
Tensor reshape_labels(const Tensor& labels, const Tensor& logits, int64_t labels_dimension,
                      const char* head);
// Every label in [low, high) (or [low, high] when high_inclusive), or InvalidArgumentError
// naming the first outside.
void check_label_range(const Tensor& labels, double low, double high, bool high_inclusive,
                       const char* head);
// Weights [batch], [batch, 1] (or [batch, logits_dimension] where per-logit weights are
// allowed) as the logits' dtype, rank 2.
Tensor reshape_weights(const Tensor& weights, const Tensor& logits, bool allow_per_logit,
                       const char* head);
// Zeros of x's shape and dtype (tf.zeros_like), computed from x by ops (x < -inf, false for
// every value, NaN included), so that an export traces them as depending on the batch instead
// of as a constant of one batch's shape.
Tensor zeros_like(const Tensor& x);
// [batch, n_classes] int32 rows 0, 1, ..., n_classes - 1 (base_head.all_class_ids), batch as the
// logits' [batch, ...] (computed from them, as zeros_like, for the same reason).
Tensor all_class_ids(const Tensor& logits, int64_t n_classes);
// max(label_mean, 1 - label_mean) over the stream: the accuracy of always predicting the more
// frequent class, computed from the `label/mean` metric's statistics.
nn::metrics::MetricOp accuracy_baseline(const nn::metrics::MetricOp& label_mean);
// Class ids (any integer dtype, any shape) as their decimal strings, as TF's heads give
// `classes` without a label_vocabulary (tf.strings.as_string), written as an index-to-string
// lookup over "0" ... "n_classes - 1" so that an export traces it for any batch.
Tensor class_id_strings(const Tensor& ids, int64_t n_classes);

}  // namespace est::canned::detail
