// Losses as tf.compat.v1.losses (labels, logits/predictions, weights, ..., reduction): per-example
// losses from the fused ops in ops/nn_ops.h, weighted, then reduced over the batch, following
// tensorflow/python/ops/losses/losses_impl.py (compute_weighted_loss, Reduction).
//
// The default reduction is TF1's: kSumByNonzeroWeights, the weighted sum divided by the number
// of non-zero weights (broadcast to the losses' shape), so a ported job gets TF1's numbers
// without touching its loss calls. It differs from Keras's SUM_OVER_BATCH_SIZE (which divides
// by every element, zero-weighted ones included) only when some weight is zero: pass
// Reduction::kSumOverBatchSize explicitly for Keras's value. Weights are a scalar or a tensor
// broadcastable to the per-example losses (e.g. [N] for sparse_softmax_cross_entropy, [N, 1]
// or [N, D] for elementwise losses); a zero denominator gives 0 (TF's _safe_div).
#pragma once

#include <cstdint>

#include "ops/tensor.h"

namespace est::nn {

enum class Reduction : uint8_t {
  kNone,                // the weighted per-example losses
  kSum,                 // their sum
  kMean,                // sum / sum of the (broadcast) weights
  kSumOverBatchSize,    // sum / number of loss elements (Keras's default)
  kSumByNonzeroWeights  // sum / number of non-zero (broadcast) weights (TF1's default)
};

// A scalar weight or a weight tensor.
class LossWeights {
 public:
  LossWeights(double value = 1.0) : scalar_(value) {}         // NOLINT: implicit on purpose
  LossWeights(Tensor tensor) : tensor_(std::move(tensor)) {}  // NOLINT
  bool is_tensor() const { return tensor_.defined(); }
  double scalar() const { return scalar_; }
  const Tensor& tensor() const { return tensor_; }

 private:
  double scalar_ = 1.0;
  Tensor tensor_;
};

// The reduction recorded on `loss`: tf.compat.v1's compute_weighted_loss records the "last loss
// reduction" on the graph, kNone included; here every loss function records it on its result
// (nn wraps the gradient function of the result's autograd node; ops holds no field for it), and
// a loss computed from such results (reduce_sum(losses) / batch, or a loss plus a regularizer)
// has the reduction of the nearest one in its autograd graph (breadth first from `loss`).
// Optimizer::minimize reads it into the TrainOp it builds when MinimizeOptions::loss_reduction
// is unset (the TF1 fallback; heads and Keras pass theirs), where the Estimator's strategy
// scaling reads it (see TrainOp::loss_reduction). kSumByNonzeroWeights
// (TF's graph starts with None, which also counts as a mean) when no loss function took part,
// or when `loss` records no gradient (computed under NoGradGuard, or from constants only).
Reduction loss_reduction(const Tensor& loss);
// Whether a loss whose last recorded reduction is `reduction` counts as a per-replica MEAN, as
// tf.compat.v1.distribute.get_loss_reduction() decides under the Estimator
// (tensorflow/python/distribute/distribute_lib.py, distribute_utils.py in later releases):
// every reduction but kSum does, kNone included (TF cannot tell how the user then reduced the
// per-example losses, e.g. reduce_sum(losses) / global_batch, and divides by the replica count all
// the same).
bool is_mean_reduction(Reduction reduction);

// Weights and reduces per-element `losses` as tf.compat.v1.losses.compute_weighted_loss.
Tensor compute_weighted_loss(const Tensor& losses, const LossWeights& weights = 1.0,
                             Reduction reduction = Reduction::kSumByNonzeroWeights);

// labels: int32/int64 class ids [N]; logits: [N, C].
Tensor sparse_softmax_cross_entropy(const Tensor& labels, const Tensor& logits,
                                    const LossWeights& weights = 1.0,
                                    Reduction reduction = Reduction::kSumByNonzeroWeights);
// onehot_labels: [N, C] probabilities; logits: [N, C]. label_smoothing s replaces the labels
// by labels * (1 - s) + s / C.
Tensor softmax_cross_entropy(const Tensor& onehot_labels, const Tensor& logits,
                             const LossWeights& weights = 1.0, double label_smoothing = 0.0,
                             Reduction reduction = Reduction::kSumByNonzeroWeights);
// labels, logits: same shape, elementwise. label_smoothing s: labels * (1 - s) + s / 2.
Tensor sigmoid_cross_entropy(const Tensor& multi_class_labels, const Tensor& logits,
                             const LossWeights& weights = 1.0, double label_smoothing = 0.0,
                             Reduction reduction = Reduction::kSumByNonzeroWeights);
// (predictions - labels)^2, elementwise.
Tensor mean_squared_error(const Tensor& labels, const Tensor& predictions,
                          const LossWeights& weights = 1.0,
                          Reduction reduction = Reduction::kSumByNonzeroWeights);
// 0.5 e^2 where |e| <= delta, delta (|e| - 0.5 delta) beyond, e = predictions - labels.
Tensor huber(const Tensor& labels, const Tensor& predictions, const LossWeights& weights = 1.0,
             double delta = 1.0, Reduction reduction = Reduction::kSumByNonzeroWeights);

}  // namespace est::nn
